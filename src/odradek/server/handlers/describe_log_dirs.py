"""DescribeLogDirs (35): each log dir with the size of every partition in it.

An offline dir (its disk failed, see storage/manager.py) answers KAFKA_STORAGE_ERROR
with no partitions and -1 for its volume's bytes, as Kafka does. A partition being
moved into a dir (AlterReplicaLogDirs) is listed there as a future replica with the
bytes copied so far; offset_lag is 0 for the rest (they are not being moved).
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 35


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    wanted: dict[str, set[int]] | None = None
    if request.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in request.topics}
    results = []
    for usage in ctx.ports.logs.dir_usage():
        by_topic: dict[str, list[Any]] = {}
        entries = [(tp, size, False) for tp, size in usage.partitions.items()]
        entries += [(tp, size, True) for tp, size in
                    getattr(usage, "future_partitions", {}).items()]
        for (topic, index), size, future in sorted(entries):
            if wanted is not None and index not in wanted.get(topic, ()):
                continue
            by_topic.setdefault(topic, []).append(
                build(schema.DescribeLogDirsPartition, partition_index=index,
                      partition_size=size, offset_lag=0, is_future_key=future)
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
