"""ShareGroupDescribe (77): a share group's epochs, assignor and members."""

from __future__ import annotations

import uuid
from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.share_common import shares

API_KEY = 77
NO_OPERATIONS = -2147483648
ASSIGNOR = "simple"


def _assignment(ctx: RequestContext, a: dict[uuid.UUID, frozenset[int]]) -> Any:
    schema = ctx.schema
    topics = ctx.groups.log.topics
    return build(schema.Assignment, topic_partitions=tuple(
        build(schema.TopicPartitions, topic_id=t, topic_name=topics.name_of(t) or "",
              partitions=tuple(sorted(p)))
        for t, p in sorted(a.items(), key=lambda i: str(i[0]))))


def _describe(ctx: RequestContext, group_id: str) -> Any:
    schema = ctx.schema

    def failed(code: ErrorCode, message: str | None = None, state: str = "") -> Any:
        return build(schema.DescribedGroup, error_code=code, error_message=message,
                     group_id=group_id, group_state=state, group_epoch=-1,
                     assignment_epoch=-1, assignor_name="", members=(),
                     authorized_operations=NO_OPERATIONS)

    try:
        group = shares(ctx).coordinator.group(group_id)
    except KafkaError as e:
        return failed(e.code, str(e))
    if group is None:
        return failed(ErrorCode.group_id_not_found, f"Group {group_id} not found.", "Dead")
    members = tuple(
        build(schema.Member, member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.epoch,
              client_id=m.client_id, client_host=m.client_host,
              subscribed_topic_names=tuple(m.subscribed_names),
              assignment=_assignment(ctx, m.assigned))
        for m in group.members.values())
    return build(schema.DescribedGroup, error_code=ErrorCode.none, error_message=None,
                 group_id=group_id, group_state=group.state_name,
                 group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                 assignor_name=ASSIGNOR, members=members,
                 authorized_operations=NO_OPERATIONS)


def handle(ctx: RequestContext, request: Any) -> Any:
    return build(ctx.schema.ShareGroupDescribeResponse,
                 groups=tuple(_describe(ctx, g) for g in request.group_ids))


HANDLER = ApiHandler(API_KEY, 1, 1, handle)
