"""OffsetFetch (9): a group's committed offsets (-1 where it has none).

v8+ asks for several groups at once; a missing topic list means every partition.
"""

from __future__ import annotations

from typing import Any

from odradek.coordinator.group import OffsetAndMetadata
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.group_common import coordinator

API_KEY = 9
NO_OFFSET = OffsetAndMetadata(-1, -1, "")


def _fetch(ctx: RequestContext, group_id: str, topics: Any, member_id: str | None = None,
           member_epoch: int = -1) -> tuple[ErrorCode, dict[str, list[tuple[int, Any]]]]:
    wanted = None if topics is None else [(t.name, p) for t in topics
                                          for p in t.partition_indexes]
    try:
        found = coordinator(ctx).fetch_offsets(group_id, wanted, member_id, member_epoch)
        error = ErrorCode.none
    except KafkaError as e:
        found, error = {}, e.code
    out: dict[str, list[tuple[int, Any]]] = {}
    for tp in (sorted(found) if wanted is None else wanted):
        out.setdefault(tp[0], []).append((tp[1], found.get(tp, NO_OFFSET)))
    return error, out


def _topics(ctx: RequestContext, topic_cls: Any, partition_cls: Any,
            offsets: dict[str, list[tuple[int, Any]]], error: ErrorCode) -> tuple[Any, ...]:
    # v1 has no group-level error: each partition carries it
    partition_error = error if ctx.version < 2 else ErrorCode.none
    return tuple(
        build(topic_cls, name=topic, partitions=tuple(
            build(partition_cls, partition_index=p, committed_offset=o.offset,
                  committed_leader_epoch=o.leader_epoch, metadata=o.metadata,
                  error_code=partition_error)
            for p, o in parts))
        for topic, parts in offsets.items()
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    if ctx.version >= 8:
        groups = []
        for g in request.groups:
            error, offsets = _fetch(ctx, g.group_id, g.topics, getattr(g, "member_id", None),
                                    getattr(g, "member_epoch", -1))
            groups.append(build(
                schema.OffsetFetchResponseGroup, group_id=g.group_id, error_code=error,
                topics=_topics(ctx, schema.OffsetFetchResponseTopics,
                               schema.OffsetFetchResponsePartitions, offsets, error)))
        return build(schema.OffsetFetchResponse, groups=tuple(groups))
    error, offsets = _fetch(ctx, request.group_id, request.topics)
    return build(schema.OffsetFetchResponse, error_code=error,
                 topics=_topics(ctx, schema.OffsetFetchResponseTopic,
                                schema.OffsetFetchResponsePartition, offsets, error))


HANDLER = ApiHandler(API_KEY, 1, 9, handle)
