"""CreatePartitions (37): add partitions to a topic; never fewer."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.create_topics import MAX_RECORDS_PER_USER_OP, TOO_LARGE

API_KEY = 37


def _new_partitions(ctx: RequestContext, topics: Any) -> int:
    image = ctx.metadata.image.topics
    return sum(max(t.count - len(image[t.name].partitions) if t.name in image else 0, 0)
               for t in topics)


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    results = []
    if _new_partitions(ctx, request.topics) > MAX_RECORDS_PER_USER_OP:
        # as Kafka's controller: the whole request, each topic answering the error
        return build(schema.CreatePartitionsResponse, results=tuple(
            build(schema.CreatePartitionsTopicResult, name=t.name,
                  error_code=ErrorCode.policy_violation, error_message=TOO_LARGE)
            for t in request.topics))
    for t in request.topics:
        try:
            assignments = (
                [tuple(a.broker_ids) for a in t.assignments] if t.assignments else None
            )
            if ctx.mutation_quota is not None:
                # valid first, then the partitions added are charged (as Kafka's controller)
                await ctx.metadata.create_partitions(t.name, t.count, assignments,
                                                     validate_only=True)
                ctx.record_mutation(t.count - len(ctx.metadata.image.topics[t.name].partitions))
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
