"""AlterPartitionReassignments (45): move partitions' replicas, or cancel a move (null
replicas). Each partition is answered on its own; the move itself is the controller's."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.partition_admin import alter_reassignment

API_KEY = 45


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            replicas = None if p.replicas is None else tuple(int(r) for r in p.replicas)
            code, message = await alter_reassignment(ctx.metadata, (t.name, p.partition_index),
                                                     replicas)
            partitions.append(build(schema.ReassignablePartitionResponse,
                                    partition_index=p.partition_index, error_code=code,
                                    error_message=message))
        topics.append(build(schema.ReassignableTopicResponse, name=t.name,
                            partitions=tuple(partitions)))
    return build(schema.AlterPartitionReassignmentsResponse, error_code=ErrorCode.none,
                 error_message=None, responses=tuple(topics))


HANDLER = ApiHandler(API_KEY, 0, 0, handle)
