"""DescribeGroups (15): a classic group's state, protocol and members.

Members' metadata and assignments are shown when the group is Stable, as Kafka does.
A consumer-protocol group is described by ConsumerGroupDescribe instead, a share group
by ShareGroupDescribe: DescribeGroups answers them Dead (GROUP_ID_NOT_FOUND from v6).
"""

from __future__ import annotations

from typing import Any

from odradek.coordinator.group.classic import ClassicGroup, State
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.group_common import coordinator

API_KEY = 15


def _describe(ctx: RequestContext, group_id: str) -> Any:
    schema = ctx.schema

    def described(code: ErrorCode, state: str = "", protocol_type: str = "",
                  protocol: str = "", members: tuple[Any, ...] = (),
                  message: str | None = None) -> Any:
        return build(schema.DescribedGroup, error_code=code, error_message=message,
                     group_id=group_id, group_state=state, protocol_type=protocol_type,
                     protocol_data=protocol, members=members,
                     authorized_operations=-2147483648)

    try:
        shares = ctx.ports.shares
        if shares is not None and shares.coordinator.group(group_id) is not None:
            # as Kafka's classicGroup lookup: a share group is not a classic group
            if ctx.version < 6:
                return described(ErrorCode.none, State.DEAD.value)
            return described(ErrorCode.group_id_not_found, State.DEAD.value,
                             message=f"Group {group_id} is not a classic group.")
        group = coordinator(ctx).group(group_id)
    except KafkaError as e:
        return described(e.code)
    if group is None or (isinstance(group, ClassicGroup) and group.state == State.DEAD):
        code = ErrorCode.group_id_not_found if ctx.version >= 6 else ErrorCode.none
        return described(code, State.DEAD.value)
    if not isinstance(group, ClassicGroup):
        return described(ErrorCode.group_id_not_found, "",
                         message=f"Group {group_id} is not a classic group.")
    stable = group.state == State.STABLE
    members = tuple(
        build(schema.DescribedGroupMember, member_id=m.member_id,
              group_instance_id=m.instance_id, client_id=m.client_id,
              client_host=m.client_host,
              member_metadata=m.metadata(group.protocol_name) if stable else b"",
              member_assignment=m.assignment if stable else b"")
        for m in group.members.values()
    )
    return described(ErrorCode.none, group.state.value, group.protocol_type or "",
                     (group.protocol_name or "") if stable else "", members)


def handle(ctx: RequestContext, request: Any) -> Any:
    return build(ctx.schema.DescribeGroupsResponse,
                 groups=tuple(_describe(ctx, g) for g in request.groups))


HANDLER = ApiHandler(API_KEY, 0, 6, handle)
