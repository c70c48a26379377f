"""OffsetFetch (9): a group's committed offsets (-1 where it has none).

v8+ asks for several groups at once; a missing topic list means every partition.
With `require_stable` (v7+, what read_committed consumers send) a partition whose
offset an open transaction may still change answers UNSTABLE_OFFSET_COMMIT, and the
consumer retries until the transaction ends.
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
           member_epoch: int = -1, require_stable: bool = False
           ) -> tuple[ErrorCode, dict[str, list[tuple[int, Any, ErrorCode | None]]]]:
    wanted = None if topics is None else [(t.name, p) for t in topics
                                          for p in t.partition_indexes]
    unstable: set[tuple[str, int]] = set()
    try:
        found = coordinator(ctx).fetch_offsets(group_id, wanted, member_id, member_epoch)
        error = ErrorCode.none
        if require_stable:
            unstable = coordinator(ctx).unstable_offsets(group_id)
    except KafkaError as e:
        found, error = {}, e.code
    out: dict[str, list[tuple[int, Any, ErrorCode | None]]] = {}
    for tp in (sorted(found | dict.fromkeys(unstable)) if wanted is None else wanted):
        code = ErrorCode.unstable_offset_commit if tp in unstable else None
        offset = NO_OFFSET if code is not None else found.get(tp, NO_OFFSET)
        out.setdefault(tp[0], []).append((tp[1], offset, code))
    return error, out


def _topics(ctx: RequestContext, topic_cls: Any, partition_cls: Any,
            offsets: dict[str, list[tuple[int, Any, ErrorCode | None]]], error: ErrorCode
            ) -> tuple[Any, ...]:
    # v1 has no group-level error: each partition carries it
    partition_error = error if ctx.version < 2 else ErrorCode.none
    return tuple(
        build(topic_cls, name=topic, partitions=tuple(
            build(partition_cls, partition_index=p, committed_offset=o.offset,
                  committed_leader_epoch=o.leader_epoch, metadata=o.metadata,
                  error_code=partition_error if code is None else code)
            for p, o, code in parts))
        for topic, parts in offsets.items()
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    if ctx.version >= 8:
        groups = []
        for g in request.groups:
            error, offsets = _fetch(ctx, g.group_id, g.topics, getattr(g, "member_id", None),
                                    getattr(g, "member_epoch", -1),
                                    getattr(request, "require_stable", False))
            groups.append(build(
                schema.OffsetFetchResponseGroup, group_id=g.group_id, error_code=error,
                topics=_topics(ctx, schema.OffsetFetchResponseTopics,
                               schema.OffsetFetchResponsePartitions, offsets, error)))
        return build(schema.OffsetFetchResponse, groups=tuple(groups))
    error, offsets = _fetch(ctx, request.group_id, request.topics,
                            require_stable=getattr(request, "require_stable", False))
    return build(schema.OffsetFetchResponse, error_code=error,
                 topics=_topics(ctx, schema.OffsetFetchResponseTopic,
                                schema.OffsetFetchResponsePartition, offsets, error))


HANDLER = ApiHandler(API_KEY, 1, 9, handle)
