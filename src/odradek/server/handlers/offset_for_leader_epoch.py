"""OffsetForLeaderEpoch (23): where a leader epoch ends in the leader's log.

Followers ask it after a leader change to find where their log diverges (KIP-101/279);
consumers ask it after one to detect a truncated log (KIP-320). The answer is the
largest epoch ≤ the requested one in the leader-epoch cache and the offset where the
next epoch starts (the log end for the latest epoch); (-1, -1) when the leader knows no
such epoch. Only the leader answers, and `current_leader_epoch` is checked.

Versions 2-4: kio has no schema for v0-1 (Kafka 4 dropped them; clients since Kafka 2.1
and librdkafka send v2+).
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.storage.epochs import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET

API_KEY = 23


def end_offset(ctx: RequestContext, topic: str, partition: int, current_leader_epoch: int,
               leader_epoch: int) -> tuple[ErrorCode, int, int]:
    """(error code, epoch, end offset)."""
    try:
        p = ctx.replicas.get_leader(topic, partition, current_leader_epoch)
        epoch, end = p.log.leader_epochs.end_offset_for(leader_epoch, p.log.log_end_offset)
        return ErrorCode.none, epoch, end
    except KafkaError as e:
        return e.code, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    topics = []
    for t in request.topics:
        results = []
        for p in t.partitions:
            code, epoch, end = end_offset(ctx, t.topic, p.partition,
                                          getattr(p, "current_leader_epoch", -1), p.leader_epoch)
            results.append(build(schema.EpochEndOffset, error_code=code, partition=p.partition,
                                 leader_epoch=epoch, end_offset=end))
        topics.append(build(schema.OffsetForLeaderTopicResult, topic=t.topic,
                            partitions=tuple(results)))
    return build(schema.OffsetForLeaderEpochResponse, topics=tuple(topics))


HANDLER = ApiHandler(API_KEY, 2, 4, handle)
