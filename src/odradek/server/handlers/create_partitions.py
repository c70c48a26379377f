"""CreatePartitions (37): add partitions to a topic; never fewer."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 37


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    results = []
    for t in request.topics:
        try:
            assignments = (
                [tuple(a.broker_ids) for a in t.assignments] if t.assignments else None
            )
            await ctx.metadata.create_partitions(
                t.name, t.count, assignments, validate_only=request.validate_only
            )
            code, message = ErrorCode.none, None
        except KafkaError as e:
            code, message = e.code, str(e)
        results.append(build(schema.CreatePartitionsTopicResult, name=t.name, error_code=code,
                             error_message=message))
    return build(schema.CreatePartitionsResponse, results=tuple(results))


HANDLER = ApiHandler(API_KEY, 0, 3, handle)
