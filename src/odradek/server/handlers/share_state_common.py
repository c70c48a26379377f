"""What the share coordinator's APIs (83-87) share: one answer per partition, each
partition's error its own (NOT_COORDINATOR where another broker holds its state,
FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH, INVALID_REQUEST), as Kafka's
ShareCoordinatorService answers them. These are inter-broker APIs: Kafka's share-
partition leaders call them, and so do ours when the state lives on another broker."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import RequestContext, build

if TYPE_CHECKING:
    from odradek.coordinator.share.state import ShareStateCoordinator

# (group id, topic id, partition data) → the partition's result fields
PerPartition = Callable[[str, Any, Any], Awaitable[dict[str, Any]]]


def state_coordinator(ctx: RequestContext) -> ShareStateCoordinator:
    port = ctx.ports.shares
    if port is None or port.state is None:
        raise KafkaError("this broker runs no share coordinator",
                         ErrorCode.coordinator_not_available)
    return port.state


def per_partition(ctx: RequestContext, request: Any, response: str, result: str,
                  fn: PerPartition) -> Awaitable[Any]:
    """Run `fn` for every partition of the request at once; the response `response`
    with one `result` entry per topic."""
    schema = ctx.schema

    async def one(topic_id: Any, p: Any) -> Any:
        try:
            if topic_id is None:
                raise KafkaError("The topic id is null.", ErrorCode.invalid_request)
            if not request.group_id:
                raise KafkaError("The group id is empty.", ErrorCode.invalid_request)
            fields = await fn(request.group_id, topic_id, p)
            return build(schema.PartitionResult, partition=p.partition,
                         error_code=ErrorCode.none, **fields)
        except KafkaError as e:
            return build(schema.PartitionResult, partition=p.partition, error_code=e.code,
                         error_message=str(e), **_empty(schema))

    async def run() -> Any:
        results = []
        for t in request.topics:
            parts = await asyncio.gather(*(one(t.topic_id, p) for p in t.partitions))
            results.append(build(getattr(schema, result), topic_id=t.topic_id,
                                 partitions=tuple(parts)))
        return build(getattr(schema, response), results=tuple(results))

    return run()


def _empty(schema: Any) -> dict[str, Any]:
    """The fields an error result carries besides its code (Kafka's defaults)."""
    names = set(getattr(schema.PartitionResult, "__dataclass_fields__", {}))
    out: dict[str, Any] = {}
    for name, value in (("state_epoch", 0), ("leader_epoch", -1), ("start_offset", -1),
                        ("state_batches", ()), ("delivery_complete_count", -1)):
        if name in names:
            out[name] = value
    return out
