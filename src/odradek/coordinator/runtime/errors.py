"""What any coordinator answers about the partition that owns a key, as Kafka's runtime
answers it (the same codes for groups, transactions, share groups and the registry),
and how a failed write to the partition reads to the client."""

from __future__ import annotations

from odradek.protocol.errors import ErrorCode, KafkaError


class CoordinatorLoadInProgress(KafkaError):
    code = ErrorCode.coordinator_load_in_progress


class CoordinatorNotAvailable(KafkaError):
    code = ErrorCode.coordinator_not_available


class NotCoordinator(KafkaError):
    code = ErrorCode.not_coordinator


def append_error(e: KafkaError, too_large: ErrorCode = ErrorCode.unknown_server_error
                 ) -> ErrorCode:
    """What a failed write to a coordinator partition tells the client (Kafka's
    CoordinatorRuntime maps the log's errors the same way for every coordinator):
    retriable errors of the log become "find the coordinator again"; a batch too large
    is `too_large` (OffsetCommit says INVALID_COMMIT_OFFSET_SIZE)."""
    code = e.code
    if code in (ErrorCode.unknown_topic_or_partition, ErrorCode.not_enough_replicas,
                ErrorCode.not_enough_replicas_after_append, ErrorCode.request_timed_out):
        return ErrorCode.coordinator_not_available
    if code in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    if code in (ErrorCode.message_too_large, ErrorCode.record_list_too_large,
                ErrorCode.invalid_fetch_size):
        return too_large
    return code
