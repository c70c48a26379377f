"""ListOffsets (2): earliest, latest, by timestamp, and the offset of the max timestamp.

v0 (dropped by Kafka 4, still sent by Burrow/sarama) answers with a list of offsets:
the one offset the other versions give, or none when there is none.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol import list_offsets_v0 as v0
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.replication.replica_manager import Partition
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 2
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
READ_COMMITTED = 1


def lookup(partition: Partition, timestamp: int, read_committed: bool,
           from_follower: bool = False) -> tuple[int, int, int]:
    """(timestamp, offset, leader_epoch) for one ListOffsets query; offset -1 if none."""
    log = partition.log
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, log.log_start_offset, _epoch_at(partition, log.log_start_offset)
    if timestamp == LATEST:
        if from_follower:
            offset = log.log_end_offset
        elif read_committed:
            offset = partition.last_stable_offset
        else:
            offset = partition.high_watermark
        return -1, offset, partition.leader_epoch
    if timestamp == LATEST_TIERED:
        return -1, -1, -1
    if timestamp == MAX_TIMESTAMP:
        found = log.latest_timestamp()
    else:
        found = log.offset_for_timestamp(timestamp)
    if found is None:
        return -1, -1, -1
    offset, ts, epoch = found
    limit = partition.last_stable_offset if read_committed else partition.high_watermark
    if offset >= limit:
        return -1, -1, -1
    return ts, offset, epoch


def _epoch_at(partition: Partition, offset: int) -> int:
    epochs = getattr(partition.log, "leader_epochs", None)
    if epochs is None:
        return partition.leader_epoch
    for_offset = getattr(epochs, "epoch_for_offset", None)
    if for_offset is None:
        return partition.leader_epoch
    epoch = for_offset(offset)
    return partition.leader_epoch if epoch is None else int(epoch)


def _handle_v0(ctx: RequestContext, request: Any) -> Any:
    replicas = ctx.replicas
    from_follower = request.replica_id >= 0
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            try:
                partition = replicas.get_leader(t.name, p.partition_index)
                _, offset, _ = lookup(partition, p.timestamp, False, from_follower)
                offsets: tuple[Any, ...] = (offset,) if offset >= 0 and p.max_num_offsets else ()
                code = ErrorCode.none
            except KafkaError as e:
                offsets, code = (), e.code
            parts.append(v0.ListOffsetsPartitionResponse(
                partition_index=p.partition_index, error_code=code, old_style_offsets=offsets))
        topics.append(v0.ListOffsetsTopicResponse(name=t.name, partitions=tuple(parts)))
    return v0.ListOffsetsResponse(topics=tuple(topics))


def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.version == 0:
        return _handle_v0(ctx, request)
    schema = ctx.schema
    replicas = ctx.replicas
    read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    from_follower = request.replica_id >= 0
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            try:
                partition = replicas.get_leader(t.name, p.partition_index,
                                                getattr(p, "current_leader_epoch", -1))
                ts, offset, epoch = lookup(partition, p.timestamp, read_committed, from_follower)
                code = ErrorCode.none
            except KafkaError as e:
                ts, offset, epoch, code = -1, -1, -1, e.code
            parts.append(
                build(schema.ListOffsetsPartitionResponse, partition_index=p.partition_index,
                      error_code=code, timestamp=ts, offset=offset, leader_epoch=epoch)
            )
        topics.append(build(schema.ListOffsetsTopicResponse, name=t.name, partitions=tuple(parts)))
    return build(schema.ListOffsetsResponse, topics=tuple(topics))


HANDLER = ApiHandler(API_KEY, 0, 10, handle)
