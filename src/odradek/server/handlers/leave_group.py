"""LeaveGroup (13): members leave at once instead of waiting out their session.

v3+ carries several members (by member id or, for static members, instance id).
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.group_common import coordinator

API_KEY = 13


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    if ctx.version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        members = [(request.member_id, None)]
    try:
        codes = coordinator(ctx).leave_group(request.group_id, members)
        top = ErrorCode.none
    except KafkaError as e:
        codes, top = [], e.code
    if ctx.version < 3 and codes:
        top = codes[0]
    responses = tuple(
        build(schema.MemberResponse, member_id=member_id, group_instance_id=instance,
              error_code=code)
        for (member_id, instance), code in zip(members, codes, strict=False)
    )
    return build(schema.LeaveGroupResponse, error_code=top, members=responses)


HANDLER = ApiHandler(API_KEY, 0, 5, handle)
