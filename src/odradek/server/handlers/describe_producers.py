"""DescribeProducers (61): the producers a partition leader remembers.

Each producer id's epoch, last sequence and timestamp, the coordinator epoch of its
last marker, and where its open transaction began (-1 when none) — how
kafka-transactions.sh finds hanging transactions.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 61


def _partition(ctx: RequestContext, topic: str, index: int) -> Any:
    schema = ctx.schema
    try:
        partition = ctx.replicas.get(topic, index)
    except KafkaError as e:
        return build(schema.PartitionResponse, partition_index=index, error_code=e.code,
                     error_message=str(e), active_producers=())
    producers = tuple(
        build(schema.ProducerState, producer_id=e.producer_id, producer_epoch=e.producer_epoch,
              last_sequence=e.last_seq, last_timestamp=e.last_timestamp,
              coordinator_epoch=e.coordinator_epoch,
              current_txn_start_offset=(-1 if e.current_txn_first_offset is None
                                        else e.current_txn_first_offset))
        for e in sorted(partition.log.producer_state.producers.values(),
                        key=lambda e: e.producer_id))
    return build(schema.PartitionResponse, partition_index=index, error_code=ErrorCode.none,
                 error_message=None, active_producers=producers)


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    topics = tuple(
        build(schema.TopicResponse, name=t.name,
              partitions=tuple(_partition(ctx, t.name, p) for p in t.partition_indexes))
        for t in request.topics)
    return build(schema.DescribeProducersResponse, topics=topics)


HANDLER = ApiHandler(API_KEY, 0, 0, handle)
