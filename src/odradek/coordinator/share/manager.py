"""The leader's side of share groups (Kafka's SharePartitionManager): the share
sessions, one share-partition per (group, topic partition) this broker leads, and
what ShareFetch and ShareAcknowledge do with them.

A fetch reads each partition of the session from its next acquirable offset, through
the replica manager as any consumer fetch (up to the high watermark), acquires what
is available for the member and answers with the batches that hold the acquired
records; the client delivers only the acquired offsets. The share-partition starts at
the group's `share.auto.offset.reset` (latest: the high watermark when the group first
fetches it; earliest: the log start).

The share-partition's state is durable through a `Persister` (the share coordinator
on `__share_group_state`): a share-partition first used in a leader epoch reads its
state from there (and starts at `share.auto.offset.reset` only when there is none),
and every change is written back — an acknowledgement is answered only once the
share coordinator has taken it. One write at a time per share-partition, each
carrying the whole in-flight state, so changes made while a write is under way go
in the next one.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
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
from odradek.coordinator.share.stats import ShareStats
from odradek.protocol.batch import iter_headers
from odradek.protocol.errors import ErrorCode, KafkaError, OffsetOutOfRange, UnknownTopicId
from odradek.replication.partition import Partition
from odradek.replication.purgatory import DelayedFetch
from odradek.replication.replica_manager import PartitionRead

log = logging.getLogger(__name__)

READ_BYTES = 1 << 20


class Persister(Protocol):
    """Where share-partition state is kept (Kafka's Persister): the share coordinator."""

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   leader_epoch: int) -> tuple[int, int, list[tuple[int, int, int, int]]]:
        """(state epoch, start offset or -1 when there is no state, batches)."""

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int,
                    state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: list[tuple[int, int, int, int]]) -> None: ...

    async def summary(self, group_id: str, topic_id: uuid.UUID, partition: int
                      ) -> tuple[int, int, int]:
        """(state epoch, leader epoch, start offset or -1)."""

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         state_epoch: int, start_offset: int) -> None: ...

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None: ...


class InMemory:
    """No durable state (tests of the state machine alone)."""

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   leader_epoch: int) -> tuple[int, int, list[tuple[int, int, int, int]]]:
        return 0, -1, []

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int,
                    state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: list[tuple[int, int, int, int]]) -> None:
        return None

    async def summary(self, group_id: str, topic_id: uuid.UUID, partition: int
                      ) -> tuple[int, int, int]:
        return 0, -1, -1

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         state_epoch: int, start_offset: int) -> None:
        return None

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        return None


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
                 auto_offset_reset: Callable[[str], str],
                 persister: Persister | None = None,
                 read_committed: Callable[[str], bool] | None = None) -> None:
        self.config = config
        # share.isolation.level=read_committed: read up to the last stable offset and
        # archive what aborted transactions wrote
        self.read_committed = read_committed or (lambda _group: False)
        self.persister: Persister = persister or InMemory()
        self.replicas = replicas
        self.topics = topics
        self.auto_offset_reset = auto_offset_reset
        self.sessions = ShareSessionCache(config.max_share_sessions)
        self.stats = ShareStats()
        self.partitions: dict[tuple[str, uuid.UUID, int], SharePartition] = {}
        self._limits = Limits(config.record_lock_duration_ms, config.delivery_count_limit,
                              config.partition_max_record_locks)
        self._timers: set[asyncio.TimerHandle] = set()
        self._tasks: set[asyncio.Future[Any]] = set()
        # share-partition → [(changes it waits for, future of the write's error)]
        self._persist_waiters: dict[SharePartition,
                                    list[tuple[int, asyncio.Future[KafkaError | None]]]] = {}
        self._writing: set[SharePartition] = set()
        self._loading: dict[tuple[str, uuid.UUID, int], asyncio.Future[None]] = {}

    def close(self) -> None:
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()
        for task in list(self._tasks):
            task.cancel()

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
                        leader: Partition) -> SharePartition | None:
        """The share-partition if it is loaded for this leader epoch (None: `load` it)."""
        sp = self.partitions.get((group_id, topic_id, index))
        if sp is None or sp.leader_epoch != leader.leader_epoch or not sp.initialized:
            return None
        sp.move_start(leader.log.log_start_offset)
        return sp

    async def load(self, group_id: str, tps: Iterable[TopicIdPartition]) -> None:
        """Read the state of the share-partitions not loaded in their leader's current
        epoch from the share coordinator (errors are left to the fetch to report)."""
        waits = []
        for topic_id, index in tps:
            try:
                leader = self.leader(topic_id, index)
            except KafkaError:
                continue
            if self.share_partition(group_id, topic_id, index, leader) is not None:
                continue
            key = (group_id, topic_id, index)
            loading = self._loading.get(key)
            if loading is None:
                loading = self._loading[key] = asyncio.ensure_future(
                    self._load_one(key, leader))
                loading.add_done_callback(partial(self._loaded, key))
            waits.append(loading)
        if waits:
            await asyncio.gather(*waits, return_exceptions=True)

    def _loaded(self, key: tuple[str, uuid.UUID, int], future: asyncio.Future[None]) -> None:
        self._loading.pop(key, None)
        if not future.cancelled() and future.exception() is not None:
            log.info("reading the state of share-partition %s-%s-%d: %s", *key,
                     future.exception())

    async def _load_one(self, key: tuple[str, uuid.UUID, int], leader: Partition) -> None:
        group_id, topic_id, index = key
        epoch = leader.leader_epoch
        state_epoch, start, batches = await self.persister.read(group_id, topic_id, index,
                                                                epoch)
        if leader.leader_epoch != epoch:
            return  # led elsewhere meanwhile: the next fetch loads again
        old = self.partitions.get(key)
        sp = SharePartition(group_id, leader.topic, index, self._limits, self._call_later,
                            leader_epoch=epoch, stats=self.stats)
        if old is not None:
            sp.waiters = old.waiters
        sp.on_change = lambda: self._persist_later(sp)
        self.partitions[key] = sp
        if start >= 0:
            sp.load(max(start, leader.log.log_start_offset), batches, state_epoch)
        elif self.auto_offset_reset(group_id) == "earliest":
            sp.initialize(leader.log.log_start_offset)
        elif self.read_committed(group_id):
            sp.initialize(leader.last_stable_offset)
        else:
            sp.initialize(leader.high_watermark)

    # ---- persisting ------------------------------------------------------------------

    def _persist_later(self, sp: SharePartition) -> None:
        if sp not in self._writing:
            self._spawn(self._write_loop(sp))

    def persisted(self, sp: SharePartition) -> asyncio.Future[KafkaError | None]:
        """Done (with the write's error, if any) once the share coordinator has the
        share-partition's state as it is now."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[KafkaError | None] = loop.create_future()
        if sp.persisted >= sp.changes:
            future.set_result(None)
            return future
        self._persist_waiters.setdefault(sp, []).append((sp.changes, future))
        self._persist_later(sp)
        return future

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write_loop(self, sp: SharePartition) -> None:
        self._writing.add(sp)
        try:
            while sp.persisted < sp.changes:
                target = sp.changes
                error: KafkaError | None = None
                try:
                    await self.persister.write(
                        sp.group_id, self._topic_id(sp), sp.index, sp.state_epoch,
                        sp.leader_epoch, sp.start_offset, sp.state_batches())
                except KafkaError as e:
                    error = e
                except Exception as e:
                    error = KafkaError(f"writing share state failed: {e}",
                                       ErrorCode.unknown_server_error)
                if error is None:
                    sp.persisted = target
                waiting = self._persist_waiters.get(sp, [])
                done = [w for w in waiting if error is not None or w[0] <= target]
                for w in done:
                    waiting.remove(w)
                    if not w[1].done():
                        w[1].set_result(error)
                if not waiting:
                    self._persist_waiters.pop(sp, None)
                if error is not None:
                    if error.code in (ErrorCode.fenced_state_epoch,
                                      ErrorCode.fenced_leader_epoch):
                        # the state moved on without us (offsets altered, a newer
                        # leader): read it again at the next fetch
                        for key in [k for k, v in self.partitions.items() if v is sp]:
                            del self.partitions[key]
                    break  # the next change tries again, with the whole state
        finally:
            self._writing.discard(sp)

    def _topic_id(self, sp: SharePartition) -> uuid.UUID:
        found = self.topics.by_name(sp.topic)
        if found is None:
            raise KafkaError(f"topic {sp.topic} is gone", ErrorCode.unknown_topic_id)
        return found[0]

    # ---- acknowledgements ------------------------------------------------------------

    async def acknowledge(self, group_id: str, member_id: str, topic_id: uuid.UUID,
                          index: int, batches: list[AckBatch]) -> KafkaError | None:
        """One partition's acknowledgements, once the share coordinator has them; the
        error to answer for it, if any."""
        error = await self._acknowledge(group_id, member_id, topic_id, index, batches)
        self.stats.request("ack", self._topic_name(topic_id), error is not None)
        return error

    async def _acknowledge(self, group_id: str, member_id: str, topic_id: uuid.UUID,
                           index: int, batches: list[AckBatch]) -> KafkaError | None:
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
        return await self.persisted(sp)

    def _topic_name(self, topic_id: uuid.UUID) -> str:
        return self.topics.name_of(topic_id) or str(topic_id)

    def count_fetch(self, answers: Iterable[Fetched]) -> None:
        """A ShareFetch's answer: each topic-partition counted, failed when in error
        (Kafka's TotalShareFetchRequestsPerSec / FailedShareFetchRequestsPerSec)."""
        for a in answers:
            self.stats.request("fetch", self._topic_name(a.topic_id), a.error is not None)

    def release_member(self, group_id: str, member_id: str) -> None:
        """The member's session closed or it left the group: what it holds goes back."""
        self.sessions.remove(group_id, member_id)
        for (g, _, _), sp in self.partitions.items():
            if g == group_id:
                sp.release_member(member_id)

    def connection_closed(self, connection: str) -> None:
        """The connection that opened these share sessions is gone: close them and
        release what their members hold."""
        for session in self.sessions.of_connection(connection):
            self.release_member(session.group_id, session.member_id)

    def forget(self, group_id: str, topic_id: uuid.UUID, index: int) -> None:
        """Its state changed under it (offsets altered or deleted): the next fetch reads
        it again; what members hold now cannot be acknowledged."""
        self.partitions.pop((group_id, topic_id, index), None)

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
            if sp is None:
                continue  # its state is being read: the next fetch acquires
            answer.leader_id, answer.leader_epoch = -1, leader.leader_epoch
            reading.append((answer, sp, leader, sp.next_fetch_offset()))
        if not reading:
            return answers, 0
        # a fetch acquires at most max_records: reading all of max_bytes (librdkafka
        # asks for 50 MB) would mostly read what is thrown away
        per_partition = min(max_bytes, READ_BYTES)
        committed = self.read_committed(group_id)
        reads, _ = self.replicas.read(
            [(leader, None, offset, per_partition) for _, _, leader, offset in reading],
            max_bytes, committed)
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
            answer.records, answer.acquired = _acquire(sp, member_id, records, left,
                                                       read.aborted)
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


def _acquire(sp: SharePartition, member_id: str, records: bytes, max_records: int,
             aborted: list[tuple[int, int]] | None = None) -> tuple[bytes, list[Acquired]]:
    """Acquire from the batches read; the bytes of the batches holding what was
    acquired (the client skips what it was not given). With `aborted` (read_committed:
    the aborted transactions' producer ids and first offsets) a batch of an aborted
    transaction is archived, never delivered."""
    headers = list(iter_headers(records))
    acquired = sp.acquire(member_id, _log_batches(headers, aborted), max_records)
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


def _log_batches(headers: list[tuple[int, Any]], aborted: list[tuple[int, int]] | None
                 ) -> Iterator[LogBatch]:
    """What acquiring needs of each batch; the consumer's rule for aborted transactions:
    a producer's transactional batches from its aborted transaction's first offset on,
    until its ABORT marker, are aborted."""
    pending = sorted(aborted or (), key=lambda a: a[1])
    active: set[int] = set()
    for _, h in headers:
        while pending and pending[0][1] <= h.base_offset:
            active.add(pending.pop(0)[0])
        if h.is_control:
            active.discard(h.producer_id)  # its marker ends the aborted transaction
            yield LogBatch(h.base_offset, h.last_offset, True)
            continue
        yield LogBatch(h.base_offset, h.last_offset,
                       is_control=h.is_transactional and h.producer_id in active)
