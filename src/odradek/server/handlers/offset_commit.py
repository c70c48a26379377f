"""OffsetCommit (8): store a group's positions; answered once the log has them.

Classic members commit with their generation, KIP-848 members with their member epoch;
a consumer that assigns itself partitions commits with generation -1 to an empty group.
A partition that does not exist gets UNKNOWN_TOPIC_OR_PARTITION, as Kafka's metadata
check answers; the others are committed.
"""

from __future__ import annotations

import time
from typing import Any

from odradek.coordinator.group import OffsetCommit
from odradek.protocol.errors import ErrorCode
from odradek.server.handlers.base import ApiHandler, RequestContext, build, to_ms
from odradek.server.handlers.group_common import coordinator, unknown_partitions

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

    unknown = unknown_partitions(ctx, ((c.topic, c.partition) for c in commits))
    known = [c for c in commits if (c.topic, c.partition) not in unknown]

    async def commit() -> Any:
        errors: dict[tuple[str, int], Any] = dict.fromkeys(
            unknown, ErrorCode.unknown_topic_or_partition)
        if known or not commits:
            errors.update(await coordinator(ctx).commit_offsets(
                request.group_id, request.member_id,
                getattr(request, "group_instance_id", None),
                request.generation_id_or_member_epoch, known, expire))
        return _response(ctx, request, errors)

    return commit()


HANDLER = ApiHandler(API_KEY, 2, 9, handle)
