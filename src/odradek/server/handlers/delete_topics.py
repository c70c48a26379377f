"""DeleteTopics (20): by name, or by topic id (v6)."""

from __future__ import annotations

from typing import Any

from odradek.cluster.metadata import ZERO_UUID
from odradek.protocol.errors import ErrorCode, KafkaError, UnknownTopicId
from odradek.server.handlers.base import ApiHandler, RequestContext, build, to_ms

API_KEY = 20


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    controller = ctx.metadata
    wanted: list[tuple[str | None, Any]] = []
    if hasattr(request, "topic_names"):
        wanted = [(name, None) for name in request.topic_names]
    else:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    results = []
    for name, topic_id in wanted:
        try:
            if name is None:
                info = controller.image.topic_by_id(topic_id)
                if info is None:
                    raise UnknownTopicId(f"Topic id {topic_id} does not exist.")
                name = info.name
            enabled = bool(ctx.config["delete.topic.enable"])
            existing = controller.image.topics.get(name)
            if enabled and existing is not None:
                ctx.record_mutation(len(existing.partitions))  # partitions deleted
            deleted = await controller.delete_topic(name, enabled=enabled)
            results.append(build(schema.DeletableTopicResult, name=name,
                                 topic_id=deleted.topic_id, error_code=ErrorCode.none))
        except KafkaError as e:
            results.append(build(schema.DeletableTopicResult, name=name,
                                 topic_id=topic_id or ZERO_UUID, error_code=e.code,
                                 error_message=str(e)))
    response = build(schema.DeleteTopicsResponse, responses=tuple(results))
    gone = [r.name for r in results if r.error_code == ErrorCode.none]
    if gone:
        # in a cluster the controller deletes the topic's znodes a moment later: answer
        # once it has
        await ctx.metadata.settle(deleted=gone, timeout_s=max(to_ms(request.timeout), 0) / 1000)
    return response


HANDLER = ApiHandler(API_KEY, 1, 6, handle)
