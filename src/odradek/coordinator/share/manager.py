"""The leader's side of share groups (Kafka's SharePartitionManager): the share
sessions, one share-partition per (group, topic partition) this broker leads, and
what ShareFetch and ShareAcknowledge do with them.

A fetch reads each partition of the session from its next acquirable offset, through
the replica manager as any consumer fetch (up to the high watermark), acquires what
is available for the member and answers with the batches that hold the acquired
records; the client delivers only the acquired offsets. The share-partition starts at
the group's `share.auto.offset.reset` (latest: the high watermark when the group first
fetches it; earliest: the log start).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from odradek.coordinator.group.consumer import TopicsView
from odradek.coordinator.share.config import ShareConfig
from odradek.coordinator.share.partition import (
    AckBatch,
    Acquired,
    Limits,
    LogBatch,
    SharePartition,
)
from odradek.coordinator.share.sessions import ShareSessionCache, TopicIdPartition
from odradek.protocol.batch import iter_headers
from odradek.protocol.errors import ErrorCode, KafkaError, OffsetOutOfRange, UnknownTopicId
from odradek.replication.partition import Partition
from odradek.replication.purgatory import DelayedFetch
from odradek.replication.replica_manager import PartitionRead

READ_BYTES = 1 << 20


class Replicas(Protocol):
    def get_leader(self, topic: str, index: int,
                   current_leader_epoch: int = -1) -> Partition: ...

    def read(self, wanted: Iterable[tuple[Partition | None, KafkaError | None, int, int]],
             max_bytes: int, read_committed: bool, replica_id: int = -1
             ) -> tuple[list[PartitionRead], int]: ...


@dataclass(slots=True)
class Fetched:
    """One partition's part of a ShareFetch answer."""

    topic_id: uuid.UUID
    index: int
    error: KafkaError | None = None
    records: bytes = b""
    acquired: list[Acquired] = field(default_factory=list)
    leader_id: int = -1
    leader_epoch: int = -1


class SharePartitionManager:
    def __init__(self, config: ShareConfig, replicas: Replicas, topics: TopicsView,
                 auto_offset_reset: Callable[[str], str]) -> None:
        self.config = config
        self.replicas = replicas
        self.topics = topics
        self.auto_offset_reset = auto_offset_reset
        self.sessions = ShareSessionCache(config.max_share_sessions)
        self.partitions: dict[tuple[str, uuid.UUID, int], SharePartition] = {}
        self._limits = Limits(config.record_lock_duration_ms, config.delivery_count_limit,
                              config.partition_max_record_locks)
        self._timers: set[asyncio.TimerHandle] = set()

    def close(self) -> None:
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()

    def _call_later(self, delay_s: float, fn: Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._timers.discard(handle)
            fn()

        handle = loop.call_later(delay_s, fire)
        self._timers.add(handle)

    # ---- share-partitions ------------------------------------------------------------

    def leader(self, topic_id: uuid.UUID, index: int) -> Partition:
        name = self.topics.name_of(topic_id)
        if name is None:
            raise UnknownTopicId(f"unknown topic id {topic_id}")
        return self.replicas.get_leader(name, index)

    def share_partition(self, group_id: str, topic_id: uuid.UUID, index: int,
                        leader: Partition) -> SharePartition:
        key = (group_id, topic_id, index)
        sp = self.partitions.get(key)
        if sp is None:
            sp = self.partitions[key] = SharePartition(
                group_id, leader.topic, index, self._limits, self._call_later)
        if sp.leader_epoch != leader.leader_epoch:
            # led elsewhere meanwhile: what we remember is stale, and (in memory only)
            # the other leader's progress is lost — start again as a new group would
            sp.start_offset = -1
            sp.leader_epoch = leader.leader_epoch
        if not sp.initialized:
            if self.auto_offset_reset(group_id) == "earliest":
                sp.initialize(leader.log.log_start_offset)
            else:
                sp.initialize(leader.high_watermark)
        else:
            sp.move_start(leader.log.log_start_offset)
        return sp

    # ---- acknowledgements ------------------------------------------------------------

    def acknowledge(self, group_id: str, member_id: str, topic_id: uuid.UUID, index: int,
                    batches: list[AckBatch]) -> KafkaError | None:
        """One partition's acknowledgements; the error to answer for it, if any."""
        sp = self.partitions.get((group_id, topic_id, index))
        if sp is None:
            try:
                self.leader(topic_id, index)
            except KafkaError as e:
                return e
            return KafkaError(f"member {member_id} holds no records of this partition",
                              ErrorCode.invalid_record_state)
        try:
            sp.acknowledge(member_id, batches)
        except KafkaError as e:
            return e
        return None

    def release_member(self, group_id: str, member_id: str) -> None:
        """The member's session closed or it left the group: what it holds goes back."""
        self.sessions.remove(group_id, member_id)
        for (g, _, _), sp in self.partitions.items():
            if g == group_id:
                sp.release_member(member_id)

    def forget_group(self, group_id: str) -> None:
        for key in [k for k in self.partitions if k[0] == group_id]:
            del self.partitions[key]

    # ---- fetching --------------------------------------------------------------------

    def acquire(self, group_id: str, member_id: str, tps: list[TopicIdPartition],
                max_bytes: int, max_records: int) -> tuple[list[Fetched], int]:
        """Read and acquire from each partition; (answers, records acquired)."""
        answers: list[Fetched] = []
        reading: list[tuple[Fetched, SharePartition, Partition, int]] = []
        for topic_id, index in tps:
            answer = Fetched(topic_id, index)
            answers.append(answer)
            try:
                leader = self.leader(topic_id, index)
                sp = self.share_partition(group_id, topic_id, index, leader)
            except KafkaError as e:
                answer.error = e
                continue
            answer.leader_id, answer.leader_epoch = -1, leader.leader_epoch
            reading.append((answer, sp, leader, sp.next_fetch_offset()))
        if not reading:
            return answers, 0
        # a fetch acquires at most max_records: reading all of max_bytes (librdkafka
        # asks for 50 MB) would mostly read what is thrown away
        per_partition = min(max_bytes, READ_BYTES)
        reads, _ = self.replicas.read(
            [(leader, None, offset, per_partition) for _, _, leader, offset in reading],
            max_bytes, False)
        total = 0
        for (answer, sp, _, _), read in zip(reading, reads, strict=True):
            if read.error is not None:
                if isinstance(read.error, OffsetOutOfRange) and read.log_start_offset >= 0:
                    sp.move_start(read.log_start_offset)
                    continue  # the next fetch reads from the new start
                answer.error = read.error
                continue
            left = max_records - total
            if left <= 0 or not read.records:
                continue
            records = read.records
            assert isinstance(records, bytes)  # read as bytes: no file_records asked
            answer.records, answer.acquired = _acquire(sp, member_id, records, left)
            total += sum(a.last_offset - a.first_offset + 1 for a in answer.acquired)
        return answers, total

    def waiter(self, group_id: str, tps: list[TopicIdPartition]) -> DelayedFetch:
        """A wait woken by an append to one of these partitions or a record of theirs
        made available again."""
        waiter = DelayedFetch(1, 0)
        watched: list[Any] = []
        for topic_id, index in tps:
            try:
                watched.append(self.leader(topic_id, index))
            except KafkaError:
                continue
            sp = self.partitions.get((group_id, topic_id, index))
            if sp is not None:
                watched.append(sp)
        waiter.watch(watched)
        return waiter


def _acquire(sp: SharePartition, member_id: str, records: bytes, max_records: int
             ) -> tuple[bytes, list[Acquired]]:
    """Acquire from the batches read; the bytes of the batches holding what was
    acquired (the client skips what it was not given)."""
    headers = list(iter_headers(records))
    acquired = sp.acquire(member_id, (LogBatch(h.base_offset, h.last_offset, h.is_control)
                                      for _, h in headers), max_records)
    if not acquired:
        return b"", []
    first, last = acquired[0].first_offset, acquired[-1].last_offset
    start = end = None
    for pos, h in headers:
        if h.last_offset >= first and start is None:
            start = pos
        if h.base_offset <= last:
            end = pos + h.size
    return bytes(records[start or 0:end]), acquired
