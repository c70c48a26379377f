"""FindCoordinator (10): which broker coordinates a group (key type 0).

The first request creates `__consumer_offsets` (internal, compacted, 50 partitions), as
Kafka does. A group's coordinator is the leader of its offsets partition. Transaction
coordinators (key type 1) are found through the transactions port. A share-partition's
share coordinator (key type 2, v6+, key `group:topicId:partition`) is the leader of its
`__share_group_state` partition, which the first such request creates.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from typing import Any

from odradek.coordinator.group.coordinator import partition_for
from odradek.coordinator.share.state import SHARE_STATE_TOPIC, coordinator_key
from odradek.protocol.errors import ErrorCode
from odradek.server.group_storage import OFFSETS_TOPIC
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.group_common import coordinator

API_KEY = 10
GROUP, TRANSACTION, SHARE = 0, 1, 2

Found = tuple[ErrorCode, str | None, int, str, int]  # error, message, node, host, port


def _not_available(message: str) -> Found:
    return ErrorCode.coordinator_not_available, message, -1, "", -1


def _leader_of(ctx: RequestContext, topic: str, partition: int) -> Found:
    image = ctx.metadata.image
    info = image.topics[topic].partitions[partition]
    leader = image.brokers.get(info.leader)
    if leader is None or leader.fenced:
        return _not_available(f"{topic}-{partition} has no leader")
    host, port = leader.endpoint(ctx.listener)
    return ErrorCode.none, None, leader.node_id, host, port


def share_partition_key(key: str) -> tuple[str, uuid.UUID, int] | None:
    """Kafka's SharePartitionKey: `group:topicId:partition`, the topic id in Kafka's
    base64 form; None when malformed."""
    parts = key.split(":")
    if len(parts) != 3 or not parts[0].strip():
        return None
    try:
        raw = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        partition = int(parts[2])
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 16 or partition < 0:
        return None
    return parts[0].strip(), uuid.UUID(bytes=raw), partition


async def _find_share(ctx: RequestContext, key: str) -> Found:
    parsed = share_partition_key(key)
    if parsed is None:
        return (ErrorCode.invalid_request, "Invalid key format: expected - "
                f"groupId:topicId:partition, found - {key}", -1, "", -1)
    ensure = ctx.ports.ensure_share_state_topic
    if ctx.ports.shares is None or ensure is None:
        return _not_available("share groups are not enabled")
    if SHARE_STATE_TOPIC not in ctx.metadata.image.topics and not await ensure():
        return _not_available(f"{SHARE_STATE_TOPIC} could not be created")
    count = len(ctx.metadata.image.topics[SHARE_STATE_TOPIC].partitions)
    return _leader_of(ctx, SHARE_STATE_TOPIC, partition_for(coordinator_key(*parsed), count))


async def find(ctx: RequestContext, key: str, key_type: int) -> Found:
    if key_type == TRANSACTION:
        found: Found = await ctx.transactions.find_coordinator(ctx.listener, key)
        return found
    if key_type == SHARE and ctx.version >= 6:
        return await _find_share(ctx, key)
    if key_type != GROUP:
        return ErrorCode.invalid_request, f"unknown key type {key_type}", -1, "", -1
    if not key:
        return ErrorCode.invalid_group_id, "the group id is empty", -1, "", -1
    if (OFFSETS_TOPIC not in ctx.metadata.image.topics
            and not await ctx.ports.ensure_offsets_topic()):
        return _not_available(f"{OFFSETS_TOPIC} could not be created")
    return _leader_of(ctx, OFFSETS_TOPIC, coordinator(ctx).partition_for(key))


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
