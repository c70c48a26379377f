"""DescribeProducers (61): the producers a partition leader remembers.

Each producer id's epoch, last sequence and timestamp, the coordinator epoch of its
last marker, and where its open transaction began (-1 when none) — how
kafka-transactions.sh finds hanging transactions. As Kafka's handler: a partition the
metadata does not know is UNKNOWN_TOPIC_OR_PARTITION, one this broker does not host
NOT_LEADER_OR_FOLLOWER (the admin client asks the leader), one on a failed log dir
KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 61


def _error(schema: Any, index: int, code: ErrorCode) -> Any:
    return build(schema.PartitionResponse, partition_index=index, error_code=code,
                 error_message=None, active_producers=())


def _partition(ctx: RequestContext, topic: str, index: int) -> Any:
    schema = ctx.schema
    info = ctx.metadata.image.topics.get(topic)
    if info is None or not any(p.partition == index for p in info.partitions):
        return _error(schema, index, ErrorCode.unknown_topic_or_partition)
    try:
        partition = ctx.replicas.get(topic, index)
    except KafkaError:
        return _error(schema, index, ErrorCode.not_leader_or_follower)
    if partition.log.offline:
        return _error(schema, index, ErrorCode.kafka_storage_error)
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
