"""OffsetDelete (47): drop a group's committed offsets for partitions it no longer reads.

Refused per partition with GROUP_SUBSCRIBED_TO_TOPIC while a member subscribes to the
topic.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.group_common import coordinator

API_KEY = 47


def handle(ctx: RequestContext, request: Any) -> Any:
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]

    async def delete() -> Any:
        schema = ctx.schema
        try:
            errors = await coordinator(ctx).delete_offsets(request.group_id, wanted)
            top = ErrorCode.none
        except KafkaError as e:
            return build(schema.OffsetDeleteResponse, error_code=e.code, topics=())
        topics = tuple(
            build(schema.OffsetDeleteResponseTopic, name=t.name, partitions=tuple(
                build(schema.OffsetDeleteResponsePartition, partition_index=p.partition_index,
                      error_code=errors[(t.name, p.partition_index)])
                for p in t.partitions))
            for t in request.topics
        )
        return build(schema.OffsetDeleteResponse, error_code=top, topics=topics)

    return delete()


HANDLER = ApiHandler(API_KEY, 0, 0, handle)
