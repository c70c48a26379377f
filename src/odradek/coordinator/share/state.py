"""The share coordinator (Kafka's ShareCoordinator): every share-partition's durable state,
kept in `__share_group_state`, a compacted internal topic, as a state machine on the
coordinator runtime.

A share-partition (group, topic id, partition) belongs to partition
`(javaHashCode("group:topicId:partition") & 0x7fffffff) % share.coordinator.state.topic
.num.partitions` of the topic. Its state is the share-partition start offset and the
state batches above it (ranges of offsets AVAILABLE, ACKNOWLEDGED or ARCHIVED, with
their delivery counts). The first write of a key is a ShareSnapshot record; later
writes are ShareUpdate records that merge into it (new batches win where they
overlap, and whatever is below the start offset goes), and every
`share.coordinator.snapshot.update.records.per.snapshot` updates a new snapshot
replaces them. The topic is not compacted (compaction would keep only a key's last
ShareUpdate): every `share.coordinator.state.topic.prune.interval.ms` the records below
the oldest latest-snapshot of the partition's share-partitions are deleted
(DeleteRecords), as Kafka's ShareCoordinatorService prunes — each share-partition's
state is its latest ShareSnapshot and the ShareUpdates after it, so nothing below the
smallest such offset is read again. The leader epoch fences an old
partition leader (FENCED_LEADER_EPOCH), the state epoch an old state
(FENCED_STATE_EPOCH), as Kafka's ShareCoordinatorShard does.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from odradek.coordinator.group.coordinator import partition_for
from odradek.coordinator.runtime import CoordinatorLog, CoordinatorRuntime, CoordinatorTimer
from odradek.protocol.batch import BatchHeader
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import Record as LogRecord
from odradek.protocol.share_state_records import (
    SNAPSHOT,
    UPDATE,
    ShareStateKey,
    StateBatch,
    StateValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

SHARE_STATE_TOPIC = "__share_group_state"
Key = tuple[str, uuid.UUID, int]  # (group, topic id, partition)


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey (topic id in Kafka's base64 form)."""
    return f"{group_id}:{kafka_uuid(topic_id)}:{partition}"


def kafka_uuid(u: uuid.UUID) -> str:
    import base64

    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def combine(current: Sequence[StateBatch], new: Iterable[StateBatch], start_offset: int
            ) -> tuple[StateBatch, ...]:
    """`current` with `new` laid over it (new wins where they overlap), nothing below
    `start_offset`, neighbours with the same state and count joined."""
    cut: list[StateBatch] = list(current)
    for n in sorted(new, key=lambda b: b.first_offset):
        if n.last_offset < n.first_offset:
            continue
        kept: list[StateBatch] = []
        for b in cut:
            if b.last_offset < n.first_offset or b.first_offset > n.last_offset:
                kept.append(b)
                continue
            if b.first_offset < n.first_offset:
                kept.append(replace(b, last_offset=n.first_offset - 1))
            if b.last_offset > n.last_offset:
                kept.append(replace(b, first_offset=n.last_offset + 1))
        kept.append(n)
        cut = kept
    out: list[StateBatch] = []
    for b in sorted(cut, key=lambda b: b.first_offset):
        if b.last_offset < start_offset:
            continue
        if b.first_offset < start_offset:
            b = replace(b, first_offset=start_offset)
        if out and out[-1].last_offset + 1 == b.first_offset \
                and (out[-1].delivery_state, out[-1].delivery_count) \
                == (b.delivery_state, b.delivery_count):
            out[-1] = replace(out[-1], last_offset=b.last_offset)
        else:
            out.append(b)
    return tuple(out)


@dataclass
class ShareState:
    """One share-partition's state as the coordinator holds it."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    create_ms: int = -1
    write_ms: int = -1
    updates: int = 0  # ShareUpdate records since the last snapshot

    def as_value(self) -> StateValue:
        return StateValue(self.snapshot_epoch, self.leader_epoch, self.start_offset,
                          self.batches, self.state_epoch, self.create_ms, self.write_ms)

    def apply_update(self, value: StateValue) -> None:
        if value.leader_epoch >= 0:
            self.leader_epoch = value.leader_epoch
        if value.start_offset >= 0:
            self.start_offset = value.start_offset
        self.batches = combine(self.batches, value.batches, self.start_offset)
        self.updates += 1


@dataclass(frozen=True, slots=True)
class ReadResult:
    state_epoch: int
    start_offset: int  # -1: no state yet
    batches: tuple[StateBatch, ...]
    leader_epoch: int = -1


@dataclass
class ShareStateShard:
    """One `__share_group_state` partition's share-partitions."""

    partition: int
    timer: CoordinatorTimer
    states: dict[Key, ShareState] = field(default_factory=dict)
    # the leader epochs readers announced (in memory, as Kafka's leaderEpochMap)
    leader_epochs: dict[Key, int] = field(default_factory=dict)
    # the offset of each share-partition's latest ShareSnapshot record (Kafka's
    # ShareCoordinatorOffsetsManager): what pruning may not go past
    snapshot_offsets: dict[Key, int] = field(default_factory=dict)

    def redundant_offset(self) -> int | None:
        """Every record below this offset has been replaced by a later snapshot."""
        return min(self.snapshot_offsets.values()) if self.snapshot_offsets else None

    def replay(self, batch: BatchHeader, record: LogRecord) -> None:
        if record.key is None:
            return
        key = decode_key(bytes(record.key))
        if key is None:
            return
        k = (key.group_id, key.topic_id, key.partition)
        if record.value is None:
            self.states.pop(k, None)
            self.snapshot_offsets.pop(k, None)
            return
        value = decode_value(key.kind, bytes(record.value))
        if key.kind == SNAPSHOT:
            self.snapshot_offsets[k] = record.offset
            self.states[k] = ShareState(value.snapshot_epoch, value.state_epoch,
                                        value.leader_epoch, value.start_offset,
                                        combine((), value.batches, value.start_offset),
                                        value.create_ms, value.write_ms)
            return
        state = self.states.get(k)
        if state is not None:  # an update without its snapshot: compacted away, ignore
            state.apply_update(value)

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        pass

    def on_loaded(self) -> None:
        pass

    def on_unloaded(self) -> None:
        self.states.clear()
        self.leader_epochs.clear()
        self.snapshot_offsets.clear()


class ShareStateCoordinator:
    def __init__(self, coordinator_log: CoordinatorLog, partitions: int,
                 updates_per_snapshot: int = 500,
                 partition_count: Callable[[uuid.UUID], int | None] | None = None,
                 delete_records: Callable[[int, int], int] | None = None,
                 prune_interval_ms: int = 300_000) -> None:
        self.partitions = partitions
        # the topic's partition count from the metadata (None: no such topic); without
        # it (tests) every topic is taken as existing
        self.partition_count = partition_count
        self.updates_per_snapshot = updates_per_snapshot
        # told the milliseconds of each write (the metrics' write latency)
        self.on_write_ms: Callable[[float], None] = lambda _ms: None
        # DeleteRecords on a state partition (partition, offset) → its new log start
        self.delete_records = delete_records
        self.last_pruned: dict[int, int] = {}  # state partition → offset pruned to
        self.runtime: CoordinatorRuntime[ShareStateShard] = CoordinatorRuntime(
            SHARE_STATE_TOPIC, coordinator_log,
            lambda p, timer: ShareStateShard(p, timer))
        if delete_records is not None:
            self.runtime.every(prune_interval_ms, self.prune)

    def start(self) -> None:
        self.runtime.start()

    def stop(self) -> None:
        self.runtime.stop()

    def follow(self, led: Iterable[int]) -> None:
        self.runtime.follow(led)

    def partition_for(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        return partition_for(coordinator_key(group_id, topic_id, partition), self.partitions)

    def _shard(self, key: Key) -> tuple[int, ShareStateShard]:
        p = self.partition_for(*key)
        return p, self.runtime.shard(p, f"share-partition {key[0]}:{key[1]}:{key[2]}")

    def _check(self, key: Key) -> None:
        """As Kafka's ShareCoordinatorShard: a negative partition is INVALID_REQUEST, a
        topic or partition the metadata does not have UNKNOWN_TOPIC_OR_PARTITION."""
        if key[2] < 0:
            raise KafkaError("The partition id is negative.", ErrorCode.invalid_request)
        if self.partition_count is not None:
            count = self.partition_count(key[1])
            if count is None or key[2] >= count:
                raise KafkaError("This server does not host this topic-partition.",
                                 ErrorCode.unknown_topic_or_partition)

    # ---- ReadShareGroupState (84) and its summary (87) -------------------------------

    def read(self, key: Key, leader_epoch: int) -> ReadResult:
        self._check(key)
        _, shard = self._shard(key)
        known = shard.leader_epochs.get(key)
        if known is not None and known > leader_epoch:
            raise KafkaError("the leader epoch is older than the one recorded",
                             ErrorCode.fenced_leader_epoch)
        state = shard.states.get(key)
        if state is None:
            return ReadResult(0, -1, ())
        shard.leader_epochs[key] = leader_epoch
        return ReadResult(state.state_epoch, state.start_offset, state.batches,
                          state.leader_epoch)

    def summary(self, key: Key) -> ReadResult:
        self._check(key)
        state = self._shard(key)[1].states.get(key)
        if state is None:
            return ReadResult(0, -1, ())
        return ReadResult(state.state_epoch, state.start_offset, (), state.leader_epoch)

    # ---- WriteShareGroupState (85) ---------------------------------------------------

    async def write(self, key: Key, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: Sequence[StateBatch]) -> None:
        started = time.perf_counter()
        await self._write(key, state_epoch, leader_epoch, start_offset, batches)
        self.on_write_ms((time.perf_counter() - started) * 1000.0)

    async def _write(self, key: Key, state_epoch: int, leader_epoch: int,
                     start_offset: int, batches: Sequence[StateBatch]) -> None:
        self._check(key)
        p, shard = self._shard(key)
        known = shard.leader_epochs.get(key)
        if known is not None and known > leader_epoch:
            raise KafkaError("the leader epoch is older than the one recorded",
                             ErrorCode.fenced_leader_epoch)
        current = shard.states.get(key)
        if current is not None and current.state_epoch > state_epoch:
            raise KafkaError("the state epoch is older than the one recorded",
                             ErrorCode.fenced_state_epoch)
        now = int(time.time() * 1000)
        if current is None or current.updates >= self.updates_per_snapshot:
            start = start_offset if start_offset >= 0 or current is None \
                else current.start_offset
            new = ShareState(
                0 if current is None else current.snapshot_epoch + 1,
                state_epoch if state_epoch >= 0 or current is None else current.state_epoch,
                leader_epoch if leader_epoch >= 0 or current is None
                else current.leader_epoch,
                start, combine(() if current is None else current.batches, batches, start),
                now if current is None else current.create_ms, now)
            record = (encode_key(ShareStateKey(SNAPSHOT, *key)),
                      encode_value(SNAPSHOT, new.as_value()))
            offset = await self.runtime.write(p, [record])
            shard.states[key] = new
            if offset is not None:
                shard.snapshot_offsets[key] = offset
        else:
            update = StateValue(current.snapshot_epoch, leader_epoch, start_offset,
                                combine((), batches, -1))
            record = (encode_key(ShareStateKey(UPDATE, *key)), encode_value(UPDATE, update))
            await self.runtime.write(p, [record])
            state = shard.states.get(key)
            if state is not None:
                state.apply_update(update)
        if leader_epoch >= 0:
            shard.leader_epochs[key] = max(leader_epoch, shard.leader_epochs.get(key, -1))

    # ---- InitializeShareGroupState (83) ----------------------------------------------

    async def initialize(self, key: Key, state_epoch: int, start_offset: int) -> None:
        """A new state (a new state epoch) at `start_offset`: what the group coordinator
        writes when a share group starts on a partition or its offsets are reset."""
        self._check(key)
        p, shard = self._shard(key)
        current = shard.states.get(key)
        if current is not None and current.state_epoch > state_epoch:
            raise KafkaError("the state epoch is older than the one recorded",
                             ErrorCode.fenced_state_epoch)
        now = int(time.time() * 1000)
        new = ShareState(0 if current is None else current.snapshot_epoch + 1, state_epoch,
                         -1, start_offset, (), now, now)
        offset = await self.runtime.write(p, [(encode_key(ShareStateKey(SNAPSHOT, *key)),
                                               encode_value(SNAPSHOT, new.as_value()))])
        shard.states[key] = new
        shard.leader_epochs.pop(key, None)
        if offset is not None:
            shard.snapshot_offsets[key] = offset

    # ---- DeleteShareGroupState (86) --------------------------------------------------

    async def delete(self, key: Key) -> None:
        self._check(key)
        p, shard = self._shard(key)
        if key not in shard.states:
            return
        await self.runtime.write(p, [(encode_key(ShareStateKey(SNAPSHOT, *key)), None),
                                     (encode_key(ShareStateKey(UPDATE, *key)), None)])
        shard.states.pop(key, None)
        shard.leader_epochs.pop(key, None)
        shard.snapshot_offsets.pop(key, None)

    # ---- pruning `__share_group_state` -----------------------------------------------

    async def prune(self) -> None:
        """Delete what no share-partition needs from each state partition led here:
        the records below the oldest of their latest snapshots (as Kafka's
        ShareCoordinatorService, only when that offset moved since the last prune)."""
        if self.delete_records is None:
            return
        for shard in list(self.runtime.active_shards()):
            offset = shard.redundant_offset()
            if offset is None or offset <= self.last_pruned.get(shard.partition, 0):
                continue
            self.last_pruned[shard.partition] = self.delete_records(shard.partition, offset)

    def keys_of(self, group_id: str) -> list[Key]:
        """The share-partitions of `group_id` with state on this broker."""
        return [k for shard in self.runtime.active_shards() for k in shard.states
                if k[0] == group_id]
