"""ListPartitionReassignments (46): the moves in progress (all of them when the topic list
is null), with the full replica set and the replicas being added and removed."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.partition_admin import ongoing_reassignments

API_KEY = 46


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    wanted = None
    if request.topics is not None:
        wanted = [(t.name, p) for t in request.topics for p in t.partition_indexes]
    by_topic: dict[str, list[Any]] = {}
    ongoing = await ongoing_reassignments(ctx.metadata, wanted)
    for (topic, partition), info in sorted(ongoing.items()):
        by_topic.setdefault(topic, []).append(build(
            schema.OngoingPartitionReassignment, partition_index=partition,
            replicas=info.replicas, adding_replicas=info.adding_replicas,
            removing_replicas=info.removing_replicas))
    return build(schema.ListPartitionReassignmentsResponse, error_code=ErrorCode.none,
                 error_message=None, topics=tuple(
                     build(schema.OngoingTopicReassignment, name=topic, partitions=tuple(parts))
                     for topic, parts in by_topic.items()))


HANDLER = ApiHandler(API_KEY, 0, 0, handle)
