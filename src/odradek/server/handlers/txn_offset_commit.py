"""TxnOffsetCommit (28): a group's offsets, committed with a producer's transaction.

Sent to the group coordinator after AddOffsetsToTxn. The group's offsets partition
must be in the producer's ongoing transaction (else INVALID_TXN_STATE, as Kafka's
verification answers); the offsets are written at once and count from the
transaction's COMMIT marker on (coordinator/group/txn_offsets.py).
"""

from __future__ import annotations

from typing import Any

from odradek.coordinator.group import OffsetCommit
from odradek.protocol.errors import ErrorCode
from odradek.server.group_storage import OFFSETS_TOPIC
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.txn_storage import fenced_code

API_KEY = 28

# What a failed check of the producer's transaction tells a client that can retry.
_RETRIABLE = {ErrorCode.not_coordinator: ErrorCode.coordinator_load_in_progress,
              ErrorCode.coordinator_not_available: ErrorCode.coordinator_load_in_progress,
              ErrorCode.concurrent_transactions: ErrorCode.coordinator_load_in_progress}


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    broker = ctx.broker
    commits = [
        OffsetCommit(t.name, p.partition_index, p.committed_offset,
                     getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
        for t in request.topics for p in t.partitions
    ]

    async def run() -> dict[tuple[str, int], ErrorCode]:
        groups = broker.groups
        if request.group_id:  # an empty one: the group coordinator names the error
            code = broker.transactions.coordinator.verify(
                request.transactional_id, request.producer_id, request.producer_epoch,
                (OFFSETS_TOPIC, groups.partition_for(request.group_id)))
            if code != ErrorCode.none:
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
