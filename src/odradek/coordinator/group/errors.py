"""The group coordinator's failures, one exception per Kafka error code.

Handlers put `e.code` in the response's error field; nothing here is fatal to a group.
"""

from __future__ import annotations

from odradek.coordinator.runtime.errors import (  # noqa: F401  (the runtime answers these)
    CoordinatorLoadInProgress,
    CoordinatorNotAvailable,
    NotCoordinator,
)
from odradek.protocol.errors import ErrorCode, KafkaError


class InvalidGroupId(KafkaError):
    code = ErrorCode.invalid_group_id


class GroupIdNotFound(KafkaError):
    code = ErrorCode.group_id_not_found


class NonEmptyGroup(KafkaError):
    code = ErrorCode.non_empty_group


class InvalidSessionTimeout(KafkaError):
    code = ErrorCode.invalid_session_timeout


class InconsistentGroupProtocol(KafkaError):
    code = ErrorCode.inconsistent_group_protocol


class UnknownMemberId(KafkaError):
    code = ErrorCode.unknown_member_id


class MemberIdRequired(KafkaError):
    code = ErrorCode.member_id_required


class IllegalGeneration(KafkaError):
    code = ErrorCode.illegal_generation


class RebalanceInProgress(KafkaError):
    code = ErrorCode.rebalance_in_progress


class FencedInstanceId(KafkaError):
    code = ErrorCode.fenced_instance_id


class GroupMaxSizeReached(KafkaError):
    code = ErrorCode.group_max_size_reached


class FencedMemberEpoch(KafkaError):
    code = ErrorCode.fenced_member_epoch


class StaleMemberEpoch(KafkaError):
    code = ErrorCode.stale_member_epoch


class UnreleasedInstanceId(KafkaError):
    code = ErrorCode.unreleased_instance_id


class UnsupportedAssignor(KafkaError):
    code = ErrorCode.unsupported_assignor


class OffsetMetadataTooLarge(KafkaError):
    code = ErrorCode.offset_metadata_too_large
