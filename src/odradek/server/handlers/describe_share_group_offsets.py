"""DescribeShareGroupOffsets (90): each share-partition's start offset, leader epoch
and (v1) lag for share groups this broker coordinates; no topics named: every topic
the group has state for."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.share.admin import PartitionOffset
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.share_common import shares, topic_denied

API_KEY = 90


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema

    async def one_group(g: Any) -> Any:
        try:
            admin = shares(ctx).admin
            wanted = ([(t.topic_name, list(t.partitions)) for t in g.topics]
                      if g.topics is not None
                      else [(n, None) for n in admin.topics_of(g.group_id)])
        except KafkaError as e:
            return build(schema.DescribeShareGroupOffsetsResponseGroup, group_id=g.group_id,
                         topics=(), error_code=e.code, error_message=str(e))
        topics = []
        for name, partitions in wanted:
            denied = topic_denied(ctx, name)
            if denied is not None and g.topics is None:
                continue  # listing everything: what may not be seen is left out
            if denied is not None:
                topic_id, offsets = None, [PartitionOffset(p, -1, -1, -1, denied)
                                           for p in partitions or ()]
            else:
                topic_id, offsets = await admin.describe(g.group_id, name, partitions)
            topics.append(build(
                schema.DescribeShareGroupOffsetsResponseTopic, topic_name=name,
                topic_id=topic_id, partitions=tuple(build(
                    schema.DescribeShareGroupOffsetsResponsePartition,
                    partition_index=o.partition, start_offset=o.start_offset,
                    leader_epoch=o.leader_epoch, lag=o.lag,
                    error_code=o.error.code if o.error else ErrorCode.none,
                    error_message=str(o.error) if o.error else None) for o in offsets)))
        return build(schema.DescribeShareGroupOffsetsResponseGroup, group_id=g.group_id,
                     topics=tuple(topics), error_code=ErrorCode.none)

    async def run() -> Any:
        groups = [await one_group(g) for g in request.groups]
        return build(schema.DescribeShareGroupOffsetsResponse, groups=tuple(groups))

    return run()


HANDLER = ApiHandler(API_KEY, 0, 1, handle)
