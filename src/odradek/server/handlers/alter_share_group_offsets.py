"""AlterShareGroupOffsets (91): new start offsets for an empty share group's
share-partitions (what `kafka-share-groups --reset-offsets --execute` sends); each is a
new state in the share coordinator, and nothing of the old one is delivered."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.share_common import shares, topic_denied

API_KEY = 91


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema

    def answer(error: KafkaError | None, topics: list[Any]) -> Any:
        return build(schema.AlterShareGroupOffsetsResponse,
                     error_code=error.code if error else ErrorCode.none,
                     error_message=str(error) if error else None, responses=tuple(topics))

    try:
        admin = shares(ctx).admin
        admin.check_alter(request.group_id)
    except KafkaError as e:
        return answer(e, [])

    async def run() -> Any:
        topics = []
        for t in request.topics:
            topic_id: Any = None
            count = 0
            topic_error: KafkaError | None = topic_denied(ctx, t.topic_name)
            try:
                topic_id, count = admin.topic(t.topic_name)
            except KafkaError as e:
                topic_error = e
            parts = []
            for p in t.partitions:
                error = topic_error
                if error is None and not 0 <= p.partition_index < count:
                    error = KafkaError(f"{t.topic_name}-{p.partition_index} does not exist",
                                       ErrorCode.unknown_topic_or_partition)
                if error is None and p.start_offset < 0:
                    error = KafkaError("the start offset must not be negative",
                                       ErrorCode.invalid_request)
                if error is None and topic_id is not None:
                    try:
                        await admin.alter(request.group_id, topic_id, p.partition_index,
                                          p.start_offset)
                    except KafkaError as e:
                        error = e
                parts.append(build(schema.AlterShareGroupOffsetsResponsePartition,
                                   partition_index=p.partition_index,
                                   error_code=error.code if error else ErrorCode.none,
                                   error_message=str(error) if error else None))
            topics.append(build(schema.AlterShareGroupOffsetsResponseTopic,
                                topic_name=t.topic_name, topic_id=topic_id,
                                partitions=tuple(parts)))
        return answer(None, topics)

    return run()


HANDLER = ApiHandler(API_KEY, 0, 0, handle)
