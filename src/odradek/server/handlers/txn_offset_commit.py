"""TxnOffsetCommit (28): a group's offsets, committed with a producer's transaction.

Sent to the group coordinator after AddOffsetsToTxn. The group's offsets partition
must be in the producer's transaction (else INVALID_TXN_STATE, as Kafka's
verification answers): checked here when this broker also coordinates the
transaction, asked of its coordinator (AddPartitionsToTxn v5 `verify_only`, KIP-890
part 1) when another broker does. The offsets are written at once and count from
the transaction's COMMIT marker on (coordinator/group/txn_offsets.py).

v5 is transaction version 2 (KIP-890 part 2): its producer sends no AddOffsetsToTxn,
so the group's offsets partition is added to the transaction here first, by the
transactional id's coordinator wherever it is (server/txn_partition_adder.py).
"""

from __future__ import annotations

from typing import Any

from odradek.coordinator.group import OffsetCommit
from odradek.protocol.errors import ErrorCode
from odradek.server.group_storage import OFFSETS_TOPIC
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.group_common import unknown_partitions
from odradek.server.txn_storage import fenced_code

API_KEY = 28
FIRST_IMPLICIT_ADD = 5

# What a failed check of the producer's transaction tells a client that can retry.
_RETRIABLE = {ErrorCode.concurrent_transactions: ErrorCode.coordinator_load_in_progress}
# The transactional id's coordinator could not be told apart yet (its partition has no
# leader known here): the commit is taken, as before KIP-890; EndTxn still fences an
# old epoch. NOT_COORDINATOR (another broker coordinates it) is asked over the wire.
_ELSEWHERE = {ErrorCode.coordinator_not_available}
# Kafka's maybeConvertOffsetCommitError: a coordinator that could not be reached is
# retried by clients as a group coordinator still loading
_ADD_RETRIABLE = {ErrorCode.network_exception: ErrorCode.coordinator_load_in_progress,
                  ErrorCode.concurrent_transactions: ErrorCode.coordinator_load_in_progress}


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    commits = [
        OffsetCommit(t.name, p.partition_index, p.committed_offset,
                     getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
        for t in request.topics for p in t.partitions
    ]

    unknown = unknown_partitions(ctx, ((c.topic, c.partition) for c in commits))
    known = [c for c in commits if (c.topic, c.partition) not in unknown]

    async def run() -> dict[tuple[str, int], ErrorCode]:
        errors = dict.fromkeys(unknown, ErrorCode.unknown_topic_or_partition)
        if commits and not known:
            return errors
        errors.update(await verified(known))
        return errors

    async def verified(commits: list[OffsetCommit]) -> dict[tuple[str, int], ErrorCode]:
        groups = ctx.groups
        if request.group_id and ctx.version >= FIRST_IMPLICIT_ADD:
            tp = (OFFSETS_TOPIC, groups.partition_for(request.group_id))
            added = await ctx.transactions.adder.add(
                request.transactional_id, request.producer_id, request.producer_epoch, [tp])
            code = added[tp]
            if code != ErrorCode.none:
                code = _ADD_RETRIABLE.get(code, code)
                return {(c.topic, c.partition): code for c in commits}
        elif request.group_id:  # an empty one: the group coordinator names the error
            tp = (OFFSETS_TOPIC, groups.partition_for(request.group_id))
            code = ctx.transactions.coordinator.verify(
                request.transactional_id, request.producer_id, request.producer_epoch, tp)
            if code == ErrorCode.not_coordinator:
                # KIP-890 part 1: the coordinator on another broker is asked
                verified_there = await ctx.transactions.adder.verify(
                    request.transactional_id, request.producer_id, request.producer_epoch,
                    [tp])
                code = _ADD_RETRIABLE.get(verified_there[tp], verified_there[tp])
            if code != ErrorCode.none and code not in _ELSEWHERE:
                code = _RETRIABLE.get(code, code)
                return {(c.topic, c.partition): code for c in commits}
        return await groups.commit_transactional_offsets(
            request.group_id, request.producer_id, request.producer_epoch,
            getattr(request, "member_id", ""), getattr(request, "group_instance_id", None),
            getattr(request, "generation_id", -1), commits)

    async def respond() -> Any:
        errors = await run()
        topics = tuple(
            build(schema.TxnOffsetCommitResponseTopic, name=t.name, partitions=tuple(
                build(schema.TxnOffsetCommitResponsePartition,
                      partition_index=p.partition_index,
                      error_code=fenced_code(errors[(t.name, p.partition_index)],
                                             ctx.version, 3))
                for p in t.partitions))
            for t in request.topics)
        return build(schema.TxnOffsetCommitResponse, topics=topics)

    return respond()


HANDLER = ApiHandler(API_KEY, 0, 5, handle)
