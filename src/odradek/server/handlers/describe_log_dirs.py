"""DescribeLogDirs (35): each log dir with the size of every partition in it.

offset_lag concerns future replicas being moved between dirs; without a move it is 0.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 35


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    broker = ctx.broker
    wanted: dict[str, set[int]] | None = None
    if request.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in request.topics}
    results = []
    for usage in broker.log_dir_usage():
        by_topic: dict[str, list[Any]] = {}
        for (topic, index), size in sorted(usage.partitions.items()):
            if wanted is not None and index not in wanted.get(topic, ()):
                continue
            by_topic.setdefault(topic, []).append(
                build(schema.DescribeLogDirsPartition, partition_index=index,
                      partition_size=size, offset_lag=0, is_future_key=False)
            )
        results.append(
            build(
                schema.DescribeLogDirsResult,
                error_code=(ErrorCode.kafka_storage_error if getattr(usage, "offline", False)
                            else ErrorCode.none),
                log_dir=str(usage.path),
                topics=tuple(build(schema.DescribeLogDirsTopic, name=t, partitions=tuple(ps))
                             for t, ps in by_topic.items()),
                total_bytes=usage.total_bytes,
                usable_bytes=usage.usable_bytes,
            )
        )
    return build(schema.DescribeLogDirsResponse, error_code=ErrorCode.none,
                 results=tuple(results))


HANDLER = ApiHandler(API_KEY, 1, 4, handle)
