"""ShareGroupHeartbeat (76): join, stay in and leave a share group (KIP-932)."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.group.classic import ClassicGroup, State
from odradek.coordinator.share import HeartbeatResult
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build, ms
from odradek.server.handlers.group_common import client_host, client_id
from odradek.server.handlers.share_common import shares

API_KEY = 76


def _not_another_kind(ctx: RequestContext, group_id: str) -> None:
    """A group id names one group: a consumer or classic group's id is not a share
    group's (Kafka: GROUP_ID_NOT_FOUND, "not a share group")."""
    try:
        other = ctx.groups.group(group_id)
    except KafkaError:
        return  # not served here: the share coordinator answers the same
    if other is not None and not (isinstance(other, ClassicGroup)
                                  and other.state in (State.DEAD, State.EMPTY)
                                  and not other.offsets):
        raise KafkaError(f"Group {group_id} is not a share group.",
                         ErrorCode.group_id_not_found)


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    try:
        if request.group_id:
            _not_another_kind(ctx, request.group_id)
        names = request.subscribed_topic_names
        r = shares(ctx).coordinator.heartbeat(
            request.group_id, request.member_id, request.member_epoch,
            rack_id=request.rack_id,
            subscribed_names=None if names is None else list(names),
            client_id=client_id(ctx), client_host=client_host(ctx))
    except KafkaError as e:
        r = HeartbeatResult(e.code, request.member_id, request.member_epoch, message=str(e))
    assignment = None
    if r.assignment is not None:
        assignment = build(schema.Assignment, topic_partitions=tuple(
            build(schema.TopicPartitions, topic_id=t, partitions=tuple(sorted(p)))
            for t, p in sorted(r.assignment.items(), key=lambda i: str(i[0]))))
    return build(schema.ShareGroupHeartbeatResponse, error_code=r.error,
                 error_message=r.message, member_id=r.member_id or None,
                 member_epoch=r.epoch, heartbeat_interval=ms(r.heartbeat_interval_ms),
                 assignment=assignment)


HANDLER = ApiHandler(API_KEY, 1, 1, handle)
