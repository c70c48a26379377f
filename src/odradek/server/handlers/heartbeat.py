"""Heartbeat (12): a classic member is alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.group_common import coordinator

API_KEY = 12


def handle(ctx: RequestContext, request: Any) -> Any:
    try:
        code = coordinator(ctx).heartbeat(request.group_id, request.member_id,
                                          getattr(request, "group_instance_id", None),
                                          request.generation_id)
    except KafkaError as e:
        code = e.code
    return build(ctx.schema.HeartbeatResponse, error_code=code)


HANDLER = ApiHandler(API_KEY, 0, 4, handle)
