"""DescribeTopicPartitions (75, KIP-966): topics and their partitions, paged.

As Kafka's DescribeTopicPartitionsRequestHandler: the named topics (or every topic
the client may describe, when none is named) in name order, from the cursor's topic
and partition on; at most `response_partition_limit` partitions (capped by the
broker's `max.request.partition.size.limit`, at least 1) per response, and a
`next_cursor` where the next page starts. A cursor naming a topic outside the list,
or a negative partition, is INVALID_REQUEST; a named topic that does not exist is
UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name), one the
client may not describe TOPIC_AUTHORIZATION_FAILED, without saying whether it exists.
Eligible leader replicas (KIP-966's ELR) are not kept: those lists are empty.
"""

from __future__ import annotations

from typing import Any

from odradek.cluster.metadata import ZERO_UUID, TopicInfo, validate_topic_name
from odradek.protocol.errors import ErrorCode, InvalidRequest, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.metadata import NO_AUTHORIZED_OPERATIONS

API_KEY = 75


def _partitions(ctx: RequestContext, schema: Any, topic: TopicInfo, first: int,
                limit: int) -> tuple[tuple[Any, ...], int]:
    """The partitions from `first`, at most `limit`; and the next one to describe,
    -1 when the topic is done."""
    chosen = [p for p in topic.partitions if p.partition >= first][:limit]
    rest = [p for p in topic.partitions if p.partition >= first][limit:]
    out = []
    for p in chosen:
        local = ctx.replicas.partitions.get((topic.name, p.partition))
        leader, isr, offline = p.leader, p.isr, p.offline_replicas
        error = ErrorCode.none
        if local is not None and local.log.offline:
            offline = (*offline, ctx.node_id)
            isr = tuple(r for r in isr if r != ctx.node_id)
            if leader == ctx.node_id:
                leader = -1
        if leader < 0:
            error = ErrorCode.leader_not_available
        out.append(build(
            schema.DescribeTopicPartitionsResponsePartition, error_code=error,
            partition_index=p.partition, leader_id=leader, leader_epoch=p.leader_epoch,
            replica_nodes=p.replicas, isr_nodes=isr, eligible_leader_replicas=(),
            last_known_elr=(), offline_replicas=offline))
    return tuple(out), rest[0].partition if rest else -1


def _error_topic(schema: Any, name: str, code: ErrorCode) -> Any:
    return build(schema.DescribeTopicPartitionsResponseTopic, error_code=code, name=name,
                 topic_id=ZERO_UUID, is_internal=False, partitions=(),
                 topic_authorized_operations=NO_AUTHORIZED_OPERATIONS)


def _missing_code(name: str) -> ErrorCode:
    try:
        validate_topic_name(name)
    except KafkaError:
        return ErrorCode.invalid_topic_exception
    return ErrorCode.unknown_topic_or_partition


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    cursor = request.cursor
    start_topic = cursor.topic_name if cursor is not None else ""
    if cursor is not None and cursor.partition_index < 0:
        raise InvalidRequest("The partition index in cursor must be non-negative.")
    image = ctx.metadata.image
    denied = ctx.topic_denied
    every = not request.topics
    if every:
        names = sorted(n for n in image.topics if n >= start_topic
                       and (denied is None or not denied(n)))
    else:
        names = sorted({t.name for t in request.topics if t.name >= start_topic})
        if cursor is not None and cursor.topic_name not in names:
            raise InvalidRequest("DescribeTopicPartitionsRequest topic list should contain "
                                 f"the cursor topic: {cursor.topic_name}")
    limit = max(min(ctx.config["max.request.partition.size.limit"],
                    request.response_partition_limit), 1)
    topics: list[Any] = []
    unauthorized: list[Any] = []  # after the others, outside the page, as Kafka's
    next_cursor = None
    for name in names:
        if limit <= 0:
            # the page is full: the next one starts with this topic
            next_cursor = build(schema.Cursor, topic_name=name, partition_index=0)
            break
        if denied is not None and denied(name):
            unauthorized.append(_error_topic(schema, name,
                                             ErrorCode.topic_authorization_failed))
            continue
        topic = image.topics.get(name)
        if topic is None:
            if not every:
                topics.append(_error_topic(schema, name, _missing_code(name)))
            continue
        first = cursor.partition_index if cursor is not None and name == start_topic else 0
        partitions, next_partition = _partitions(ctx, schema, topic, first, limit)
        topics.append(build(
            schema.DescribeTopicPartitionsResponseTopic, error_code=ErrorCode.none,
            name=name, topic_id=topic.topic_id, is_internal=topic.internal,
            partitions=partitions, topic_authorized_operations=NO_AUTHORIZED_OPERATIONS))
        if next_partition >= 0:
            next_cursor = build(schema.Cursor, topic_name=name,
                                partition_index=next_partition)
            break
        limit -= len(partitions)
    return build(schema.DescribeTopicPartitionsResponse, topics=(*topics, *unauthorized),
                 next_cursor=next_cursor)


HANDLER = ApiHandler(API_KEY, 0, 0, handle)
