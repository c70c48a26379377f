"""SyncGroup (14): the leader hands in the assignment; every member gets its share."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.group.classic import SyncResult
from odradek.protocol.errors import KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.group_common import coordinator

API_KEY = 14


def _response(ctx: RequestContext, r: SyncResult) -> Any:
    return build(ctx.schema.SyncGroupResponse, error_code=r.error,
                 protocol_type=r.protocol_type, protocol_name=r.protocol_name,
                 assignment=r.assignment)


def handle(ctx: RequestContext, request: Any) -> Any:
    assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
    try:
        result = coordinator(ctx).sync_group(
            request.group_id, request.member_id, getattr(request, "group_instance_id", None),
            request.generation_id, getattr(request, "protocol_type", None),
            getattr(request, "protocol_name", None), assignments)
    except KafkaError as e:
        result = SyncResult(e.code)
    if isinstance(result, SyncResult):
        return _response(ctx, result)
    waiter = result

    async def wait() -> Any:
        return _response(ctx, await waiter)

    return wait()


HANDLER = ApiHandler(API_KEY, 0, 5, handle)
