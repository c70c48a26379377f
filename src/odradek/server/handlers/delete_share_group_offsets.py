"""DeleteShareGroupOffsets (92): forget an empty share group's state for whole topics
(the share coordinator's DeleteShareGroupState for each partition)."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.share_common import shares, topic_denied

API_KEY = 92


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema

    def answer(error: KafkaError | None, topics: list[Any]) -> Any:
        return build(schema.DeleteShareGroupOffsetsResponse,
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
            topic_id = None
            error: KafkaError | None = topic_denied(ctx, t.topic_name)
            try:
                if error is None:
                    topic_id, count = admin.topic(t.topic_name)
                    await admin.delete(request.group_id, topic_id, count)
            except KafkaError as e:
                error = e
            topics.append(build(schema.DeleteShareGroupOffsetsResponseTopic,
                                topic_name=t.topic_name, topic_id=topic_id,
                                error_code=error.code if error else ErrorCode.none,
                                error_message=str(error) if error else None))
        return answer(None, topics)

    return run()


HANDLER = ApiHandler(API_KEY, 0, 0, handle)
