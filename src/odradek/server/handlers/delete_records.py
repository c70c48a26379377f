"""DeleteRecords (21): move partitions' log start offsets (kafka-delete-records.sh).

Per partition, as Kafka's ReplicaManager does it: -1 means the high watermark; an
offset below 0 or above the high watermark is OFFSET_OUT_OF_RANGE; an internal topic
is INVALID_TOPIC_EXCEPTION; a topic without `delete` in its cleanup.policy is
POLICY_VIOLATION. The answer is the new low watermark (the log start offset, which
ListOffsets(earliest) now returns); the segments below it are deleted at once, their
files `file.delete.delay.ms` later. A single broker is every replica, so there is no
waiting for followers.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, InvalidTopic, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 21


def _delete(ctx: RequestContext, topic: str, index: int, offset: int) -> tuple[int, int]:
    """(low watermark, error code)."""
    try:
        info = ctx.metadata.image.topics.get(topic)
        if info is not None and info.internal:
            raise InvalidTopic(f"Cannot delete records of internal topic {topic}")
        ctx.replicas.get(topic, index)  # UnknownTopicOrPartition
        return ctx.ports.logs.delete_records(topic, index, offset), ErrorCode.none
    except KafkaError as e:
        return -1, e.code
    except KeyError:
        return -1, ErrorCode.unknown_topic_or_partition


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            low, code = _delete(ctx, t.name, p.partition_index, p.offset)
            parts.append(build(schema.DeleteRecordsPartitionResult,
                               partition_index=p.partition_index, low_watermark=low,
                               error_code=code))
        topics.append(build(schema.DeleteRecordsTopicResult, name=t.name,
                            partitions=tuple(parts)))
    return build(schema.DeleteRecordsResponse, topics=tuple(topics))


HANDLER = ApiHandler(API_KEY, 0, 2, handle)
