"""Offsets committed inside a transaction (TxnOffsetCommit, `sendOffsetsToTransaction`).

As Kafka does it: the offsets are written to the group's `__consumer_offsets` partition
at once, in a transactional batch of the producer (its id and epoch), but they stay
pending — per group, per producer id — and OffsetFetch does not return them. The
transaction's marker, written to that partition by the transaction coordinator, makes
them the group's committed offsets (COMMIT) or drops them (ABORT). The loader replays
the same rule, so offsets of an aborted transaction never come back after a restart.

Order matters as in Kafka: for a partition, the later write in the log wins. An
ordinary commit written after a pending transactional one supersedes it whatever the
transaction's outcome; a transactional one written after an ordinary commit wins
if its transaction commits.
"""

from __future__ import annotations

from collections.abc import Iterable

from odradek.coordinator.group.classic import ClassicGroup
from odradek.coordinator.group.consumer import ConsumerGroup
from odradek.coordinator.group.model import (
    Group,
    OffsetAndMetadata,
    TopicPartition,
)
from odradek.protocol.errors import ErrorCode

Pending = dict[int, dict[TopicPartition, OffsetAndMetadata]]  # producer id → offsets


def validate(group: Group | None, member_id: str, instance_id: str | None,
              generation: int) -> ErrorCode | None:
    """Kafka's checks of a transactional commit: looser than OffsetCommit's (no
    rebalance check; a producer need not be a member), but a member that names
    itself must be one, of this generation."""
    if isinstance(group, ConsumerGroup):
        verdict = group.validate_commit(member_id, generation)
        if verdict == ErrorCode.stale_member_epoch:
            return ErrorCode.illegal_generation
        return verdict if isinstance(verdict, ErrorCode) else None
    if not isinstance(group, ClassicGroup):
        return None
    if instance_id is not None and group.static.get(instance_id, member_id) != member_id:
        return ErrorCode.fenced_instance_id
    if member_id and member_id not in group.members:
        return ErrorCode.unknown_member_id
    if generation >= 0 and generation != group.generation:
        return ErrorCode.illegal_generation
    return None


def complete(groups: Iterable[Group], partition: int, producer_id: int,
             committed: bool) -> int:
    """A marker of the producer reached offsets partition `partition`: its pending
    offsets there become committed, or go. Returns how many were committed."""
    applied = 0
    for group in groups:
        if group.partition != partition:
            continue
        offsets = group.pending_txn_offsets.pop(producer_id, None)
        if offsets and committed:
            group.offsets.update(offsets)
            applied += len(offsets)
    return applied


def supersede(group: Group, partitions: Iterable[TopicPartition]) -> None:
    """An ordinary commit or deletion of these partitions was written after any
    pending transactional offsets for them: those can no longer win."""
    if not group.pending_txn_offsets:
        return
    gone = set(partitions)
    for pid in list(group.pending_txn_offsets):
        offsets = group.pending_txn_offsets[pid]
        for tp in gone.intersection(offsets):
            del offsets[tp]
        if not offsets:
            del group.pending_txn_offsets[pid]


def pending_partitions(group: Group | None) -> set[TopicPartition]:
    """Partitions whose offset a transaction may still change (UNSTABLE_OFFSET_COMMIT
    for an OffsetFetch that requires stable offsets)."""
    if group is None:
        return set()
    return {tp for offsets in group.pending_txn_offsets.values() for tp in offsets}
