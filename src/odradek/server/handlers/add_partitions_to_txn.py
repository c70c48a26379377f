"""AddPartitionsToTxn (24): partitions join a producer's transaction.

v0-v3 are what producers send (one transactional id); v4+ is the batched form brokers
send each other, whose `verify_only` asks whether partitions are already in a
transaction (KIP-890) without adding them. A partition of a topic the producer may not
write (TOPIC_AUTHORIZATION_FAILED) or that does not exist (UNKNOWN_TOPIC_OR_PARTITION)
fails, and the others answer OPERATION_NOT_ATTEMPTED, nothing added, as Kafka answers.
"""

from __future__ import annotations

from typing import Any

from odradek.cluster.metadata import INTERNAL_TOPICS
from odradek.protocol.errors import ErrorCode
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.txn_storage import fenced_code

API_KEY = 24
FIRST_BATCHED = 4

TopicPartition = tuple[str, int]


def _tv(version: int) -> int:
    """A broker's add for its producer (v4+, not verify_only) is transaction version 2's
    implicit add (KIP-890 part 2); a producer's own (v0-v3) is version 1's."""
    return 2 if version >= FIRST_BATCHED else 0


def _partitions(topics: Any) -> list[TopicPartition]:
    return [(t.name, p) for t in topics for p in t.partitions]


def _unknown(ctx: RequestContext, partitions: list[TopicPartition]) -> set[TopicPartition]:
    topics = ctx.metadata.image.topics
    return {(t, p) for t, p in partitions
            if t not in topics or not 0 <= p < len(topics[t].partitions)}


def _denied(ctx: RequestContext, partitions: list[TopicPartition]) -> set[TopicPartition]:
    """What a producer (v0-3) may not add: an internal topic always (Kafka lets only its
    coordinators write there), and a topic without WRITE (the authorization step's)."""
    if ctx.version >= FIRST_BATCHED:
        return set()
    check = ctx.topic_denied
    return {(t, p) for t, p in partitions
            if t in INTERNAL_TOPICS or (check is not None and check(t))}


async def _add(ctx: RequestContext, transactional_id: str, producer_id: int, epoch: int,
               partitions: list[TopicPartition], verify_only: bool = False
               ) -> dict[TopicPartition, ErrorCode]:
    coordinator = ctx.transactions.coordinator
    if verify_only:
        return {tp: coordinator.verify(transactional_id, producer_id, epoch, tp)
                for tp in partitions}
    denied = _denied(ctx, partitions)
    unknown = _unknown(ctx, partitions) - denied
    if denied or unknown:
        return {tp: ErrorCode.topic_authorization_failed if tp in denied
                else ErrorCode.unknown_topic_or_partition if tp in unknown
                else ErrorCode.operation_not_attempted for tp in partitions}
    code = await coordinator.add_partitions(transactional_id, producer_id, epoch,
                                            set(partitions),
                                            client_transaction_version=_tv(ctx.version))
    return dict.fromkeys(partitions, fenced_code(code, ctx.version, 2))


def _topic_results(schema: Any, partitions: list[TopicPartition],
                   errors: dict[TopicPartition, ErrorCode]) -> tuple[Any, ...]:
    by_topic: dict[str, list[Any]] = {}
    for tp in partitions:
        by_topic.setdefault(tp[0], []).append(build(
            schema.AddPartitionsToTxnPartitionResult, partition_index=tp[1],
            partition_error_code=errors[tp]))
    return tuple(build(schema.AddPartitionsToTxnTopicResult, name=topic,
                       results_by_partition=tuple(results))
                 for topic, results in by_topic.items())


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema

    async def run() -> Any:
        if ctx.version < FIRST_BATCHED:
            partitions = _partitions(request.v3_and_below_topics)
            errors = await _add(ctx, request.v3_and_below_transactional_id,
                                request.v3_and_below_producer_id,
                                request.v3_and_below_producer_epoch, partitions)
            return build(schema.AddPartitionsToTxnResponse,
                         results_by_topic_v3_and_below=_topic_results(schema, partitions,
                                                                      errors))
        results = []
        for txn in request.transactions:
            partitions = _partitions(txn.topics)
            errors = await _add(ctx, txn.transactional_id, txn.producer_id,
                                txn.producer_epoch, partitions, txn.verify_only)
            results.append(build(schema.AddPartitionsToTxnResult,
                                 transactional_id=txn.transactional_id,
                                 topic_results=_topic_results(schema, partitions, errors)))
        return build(schema.AddPartitionsToTxnResponse, error_code=ErrorCode.none,
                     results_by_transaction=tuple(results))

    return run()


HANDLER = ApiHandler(API_KEY, 0, 5, handle)
