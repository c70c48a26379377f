"""OffsetCommit (8): store a group's positions; answered once the log has them.

Classic members commit with their generation, KIP-848 members with their member epoch;
a consumer that assigns itself partitions commits with generation -1 to an empty group.
"""

from __future__ import annotations

import time
from typing import Any

from odradek.coordinator.group import OffsetCommit
from odradek.server.handlers.base import ApiHandler, RequestContext, build, to_ms
from odradek.server.handlers.group_common import coordinator

API_KEY = 8


def _response(ctx: RequestContext, request: Any, errors: dict[tuple[str, int], Any]) -> Any:
    schema = ctx.schema
    topics = tuple(
        build(schema.OffsetCommitResponseTopic, name=t.name, partitions=tuple(
            build(schema.OffsetCommitResponsePartition, partition_index=p.partition_index,
                  error_code=errors[(t.name, p.partition_index)])
            for p in t.partitions))
        for t in request.topics
    )
    return build(schema.OffsetCommitResponse, topics=topics)


def handle(ctx: RequestContext, request: Any) -> Any:
    commits = [
        OffsetCommit(t.name, p.partition_index, p.committed_offset,
                     getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
        for t in request.topics for p in t.partitions
    ]
    expire = -1
    retention = getattr(request, "retention_time", None)
    if retention is not None and to_ms(retention) >= 0:
        # v2-v4 clients may ask for their own retention (written as value version 1)
        expire = time.time_ns() // 1_000_000 + to_ms(retention)

    async def commit() -> Any:
        errors = await coordinator(ctx).commit_offsets(
            request.group_id, request.member_id, getattr(request, "group_instance_id", None),
            request.generation_id_or_member_epoch, commits, expire)
        return _response(ctx, request, errors)

    return commit()


HANDLER = ApiHandler(API_KEY, 2, 9, handle)
