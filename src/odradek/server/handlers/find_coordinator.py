"""FindCoordinator (10): which broker coordinates a group (key type 0).

The first request creates `__consumer_offsets` (internal, compacted, 50 partitions), as
Kafka does. A group's coordinator is the leader of its offsets partition. Transaction
coordinators (key type 1) are found through the transactions port.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.group_storage import OFFSETS_TOPIC
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.group_common import coordinator

API_KEY = 10
GROUP, TRANSACTION = 0, 1

Found = tuple[ErrorCode, str | None, int, str, int]  # error, message, node, host, port


def _not_available(message: str) -> Found:
    return ErrorCode.coordinator_not_available, message, -1, "", -1


async def find(ctx: RequestContext, key: str, key_type: int) -> Found:
    if key_type == TRANSACTION:
        found: Found = await ctx.transactions.find_coordinator(ctx.listener, key)
        return found
    if key_type != GROUP:
        return ErrorCode.invalid_request, f"unknown key type {key_type}", -1, "", -1
    if not key:
        return ErrorCode.invalid_group_id, "the group id is empty", -1, "", -1
    if (OFFSETS_TOPIC not in ctx.metadata.image.topics
            and not await ctx.ports.ensure_offsets_topic()):
        return _not_available(f"{OFFSETS_TOPIC} could not be created")
    image = ctx.metadata.image
    partition = coordinator(ctx).partition_for(key)
    info = image.topics[OFFSETS_TOPIC].partitions[partition]
    leader = image.brokers.get(info.leader)
    if leader is None or leader.fenced:
        return _not_available(f"{OFFSETS_TOPIC}-{partition} has no leader")
    host, port = leader.endpoint(ctx.listener)
    return ErrorCode.none, None, leader.node_id, host, port


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    key_type = getattr(request, "key_type", GROUP)
    if ctx.version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            code, message, node, host, port = await find(ctx, key, key_type)
            coordinators.append(build(schema.Coordinator, key=key, node_id=node, host=host,
                                      port=port, error_code=code, error_message=message))
        return build(schema.FindCoordinatorResponse, coordinators=tuple(coordinators))
    code, message, node, host, port = await find(ctx, request.key, key_type)
    return build(schema.FindCoordinatorResponse, error_code=code, error_message=message,
                 node_id=node, host=host, port=port)


HANDLER = ApiHandler(API_KEY, 0, 6, handle)
