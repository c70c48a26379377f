"""AlterReplicaLogDirs (34): move partitions between this broker's log dirs (JBOD).

Each partition answers at once: NONE when the move has started (or the partition is
already there), LOG_DIR_NOT_FOUND for a path that is not one of `log.dirs`,
KAFKA_STORAGE_ERROR for an offline dir or partition, REPLICA_NOT_AVAILABLE for a
partition this broker does not hold. The copy then runs in a worker thread while the
partition keeps serving, and the switch happens on the event loop (storage/dir_move.py);
DescribeLogDirs shows the partition in its new dir once it is done.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.storage.dir_move import PartitionMove

API_KEY = 34
log = logging.getLogger(__name__)


async def _run(ctx: RequestContext, move: PartitionMove) -> None:
    loop = asyncio.get_running_loop()
    try:
        # Two passes in a thread: the second copies what arrived during the first, so
        # the last pass, which stops the partition, has little left to copy.
        await loop.run_in_executor(None, move.copy)
        await loop.run_in_executor(None, move.copy)
        move.finish()
    except Exception as exc:  # the partition stays where it was
        log.error("moving %s-%d to %s failed: %s", *move.tp, move.target_dir, exc)
        move.abandon()
    finally:
        ctx.ports.logs.move_ended(move)


def _start(ctx: RequestContext, path: str, topic: str, index: int) -> ErrorCode:
    try:
        move = ctx.ports.logs.start_move(topic, index, path)
    except KafkaError as e:
        return e.code
    except KeyError:
        return ErrorCode.replica_not_available
    if move is not None and not move.started:
        move.started = True
        ctx.ports.spawn(_run(ctx, move))
    return ErrorCode.none


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    by_topic: dict[str, list[Any]] = {}
    for d in request.dirs:
        for t in d.topics:
            for index in t.partitions:
                code = _start(ctx, d.path, t.name, index)
                by_topic.setdefault(t.name, []).append(
                    build(schema.AlterReplicaLogDirPartitionResult, partition_index=index,
                          error_code=code)
                )
    results = tuple(
        build(schema.AlterReplicaLogDirTopicResult, topic_name=name, partitions=tuple(parts))
        for name, parts in by_topic.items()
    )
    return build(schema.AlterReplicaLogDirsResponse, results=results)


HANDLER = ApiHandler(API_KEY, 1, 2, handle)
