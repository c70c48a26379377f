"""ListGroups (16): the groups this broker coordinates, filtered by state and type."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.group.classic import ClassicGroup
from odradek.protocol.errors import ErrorCode
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.group_common import coordinator

API_KEY = 16


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    states = {s.lower() for s in getattr(request, "states_filter", None) or ()}
    types = {t.lower() for t in getattr(request, "types_filter", None) or ()}
    groups = []
    for g in coordinator(ctx).list_groups():
        if states and g.state_name.lower() not in states:
            continue
        if types and g.kind not in types:
            continue
        protocol_type = (g.protocol_type or "") if isinstance(g, ClassicGroup) else "consumer"
        groups.append(build(schema.ListedGroup, group_id=g.group_id,
                            protocol_type=protocol_type, group_state=g.state_name,
                            group_type=g.kind))
    shares = ctx.ports.shares
    for sg in shares.coordinator.list_groups() if shares is not None else ():
        if (states and sg.state_name.lower() not in states) or (types and "share" not in types):
            continue
        groups.append(build(schema.ListedGroup, group_id=sg.group_id, protocol_type="share",
                            group_state=sg.state_name, group_type="share"))
    return build(schema.ListGroupsResponse, error_code=ErrorCode.none, groups=tuple(groups))


HANDLER = ApiHandler(API_KEY, 0, 5, handle)
