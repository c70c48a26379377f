"""One share-partition: a topic partition as one share group consumes it (KIP-932's
SharePartition), held by the partition's leader.

The records from the share-partition start offset (SPSO) to its end offset (SPEO) are
*in flight*; each has a state, a delivery count and, while acquired, the member that
holds it and a lock that times out. Below the SPSO every record is done (acknowledged
or archived); from the SPEO on, none has been delivered yet.

    AVAILABLE ──acquire──▶ ACQUIRED ──ACCEPT──▶ ACKNOWLEDGED
        ▲                     │ ──REJECT / GAP──▶ ARCHIVED
        └──RELEASE / lock timeout (delivery count < limit; else ARCHIVED)

A record is delivered at most `delivery_count_limit` times. An offset inside [SPSO,
SPEO) that the log does not hold (compaction, a transaction marker) is done. The SPSO
moves past the done records at its front.

Every change that must survive the leader (an acknowledgement, a release, a lock
timeout, a start offset move) bumps `changes` and calls `on_change`; the manager
writes `state_batches()` to the share coordinator (`__share_group_state`) and a new
leader `load()`s them back. An acquired record is written as AVAILABLE with its
delivery count: after a restart it is delivered again.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.coordinator.share.stats import ShareStats
from odradek.protocol.errors import ErrorCode, KafkaError


class RecordState(enum.IntEnum):
    """Kafka's RecordState ids."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # KIP-1222 (ShareFetch/ShareAcknowledge v2): a new acquisition lock


DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(slots=True)
class InFlight:
    state: RecordState
    delivery_count: int
    member: str | None = None
    acquisition: int = 0  # which acquisition holds it: a stale lock timer finds it moved on


@dataclass(frozen=True, slots=True)
class Acquired:
    """A range of records acquired together, as ShareFetch's AcquiredRecords says it."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class LogBatch:
    """What acquiring needs to know of a record batch read from the log."""

    base_offset: int
    last_offset: int
    # never delivered: a transaction marker, or (read_committed) an aborted
    # transaction's records
    is_control: bool = False


@dataclass(frozen=True, slots=True)
class AckBatch:
    first_offset: int
    last_offset: int
    types: tuple[int, ...]  # one for the whole range, or one per offset

    def type_of(self, offset: int) -> int:
        if len(self.types) == 1:
            return self.types[0]
        return self.types[offset - self.first_offset]


def validate_ack_batches(batches: Sequence[AckBatch], renew: bool = False) -> None:
    """KafkaApis' checks before any state is touched: ranges in order, not
    overlapping, one type or one per offset, and known types (INVALID_REQUEST);
    RENEW only where the request version has it (`renew`)."""
    previous_last = -1
    for b in batches:
        if b.first_offset < 0 or b.last_offset < b.first_offset:
            raise KafkaError(f"bad acknowledgement range {b.first_offset}-{b.last_offset}",
                             ErrorCode.invalid_request)
        if b.first_offset <= previous_last:
            raise KafkaError("acknowledgement ranges overlap or are out of order",
                             ErrorCode.invalid_request)
        previous_last = b.last_offset
        size = b.last_offset - b.first_offset + 1
        if len(b.types) not in (1, size):
            raise KafkaError(f"{len(b.types)} acknowledge types for {size} records",
                             ErrorCode.invalid_request)
        for t in b.types:
            if t not in AckType._value2member_map_ or (t == AckType.RENEW and not renew):
                raise KafkaError(f"unknown acknowledge type {t}", ErrorCode.invalid_request)


CallLater = Callable[[float, Callable[[], None]], Any]


@dataclass(frozen=True, slots=True)
class Limits:
    lock_duration_ms: int
    delivery_count_limit: int
    max_record_locks: int


@dataclass(eq=False)
class SharePartition:
    group_id: str
    topic: str
    index: int
    limits: Limits
    call_later: CallLater  # (seconds, fn): the acquisition locks' timers
    start_offset: int = -1  # SPSO; -1 until initialized
    end_offset: int = -1  # SPEO
    leader_epoch: int = -1  # of the partition when this state began
    records: dict[int, InFlight] = field(default_factory=dict)
    # woken when records become available again (a release, a lock timeout)
    waiters: set[Any] = field(default_factory=set)
    _acquisitions: int = 0
    state_epoch: int = 0
    changes: int = 0  # bumped by each change the share coordinator must hear of
    persisted: int = 0  # the `changes` the share coordinator has taken
    on_change: Callable[[], None] | None = None
    stats: ShareStats = field(default_factory=ShareStats)

    @property
    def initialized(self) -> bool:
        return self.start_offset >= 0

    def initialize(self, offset: int) -> None:
        self.start_offset = self.end_offset = offset
        self.records.clear()  # a stale lock timer finds nothing it knows
        self._changed()

    def load(self, start_offset: int, batches: Iterable[tuple[int, int, int, int]],
             state_epoch: int) -> None:
        """The state the share coordinator kept: (first, last, state, delivery count)
        ranges above `start_offset`; offsets between them were never written, so they
        are available, as Kafka's SharePartition treats its initial read gaps."""
        self.start_offset = self.end_offset = start_offset
        self.state_epoch = state_epoch
        self.records.clear()
        # no more is ever in flight; a state claiming more (a bad WriteShareGroupState)
        # must not make one entry per offset of it
        limit = start_offset + self.limits.max_record_locks
        for first, last, state, count in sorted(batches):
            first, last = max(first, start_offset), min(last, limit - 1)
            if first > last:
                continue
            for o in range(self.end_offset, first):
                self.records[o] = InFlight(RecordState.AVAILABLE, 0)
            for o in range(first, last + 1):
                kind = RecordState(state) if state in (0, 2, 4) else RecordState.AVAILABLE
                self.records[o] = InFlight(kind, count)
            self.end_offset = max(self.end_offset, last + 1)
        self._advance_start()
        self.changes = self.persisted = 0

    def state_batches(self) -> list[tuple[int, int, int, int]]:
        """(first, last, state, delivery count) ranges of [SPSO, SPEO) as the share
        coordinator keeps them: an acquired record as AVAILABLE, an offset the log
        does not hold as ARCHIVED."""
        out: list[list[int]] = []
        records = self.records
        for o in range(self.start_offset, self.end_offset):
            r = records.get(o)
            if r is None:
                state, count = RecordState.ARCHIVED, 0
            else:
                state = RecordState.AVAILABLE if r.state is RecordState.ACQUIRED else r.state
                count = r.delivery_count
            if out and out[-1][1] == o - 1 and out[-1][2] == state and out[-1][3] == count:
                out[-1][1] = o
            else:
                out.append([o, o, int(state), count])
        return [(a, b, c, d) for a, b, c, d in out]

    def _changed(self) -> None:
        self.changes += 1
        if self.on_change is not None:
            self.on_change()

    def move_start(self, log_start_offset: int) -> None:
        """The log lost records below `log_start_offset` (retention, DeleteRecords)."""
        if log_start_offset <= self.start_offset:
            return
        for o in [o for o in self.records if o < log_start_offset]:
            del self.records[o]
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)
        self._advance_start()
        self._changed()

    # ---- what a fetch reads and acquires ---------------------------------------------

    def next_fetch_offset(self) -> int:
        """The first record that can be acquired: a released one, else the SPEO."""
        for o in range(self.start_offset, self.end_offset):
            r = self.records.get(o)
            if r is not None and r.state is RecordState.AVAILABLE:
                return o
        return self.end_offset

    def in_flight(self) -> int:
        return self.end_offset - self.start_offset

    def acquire(self, member: str, batches: Iterable[LogBatch], max_records: int
                ) -> list[Acquired]:
        """Acquire for `member` what is available in `batches` (read from the log at
        `next_fetch_offset()`), at most `max_records`; the locks start now."""
        self._acquisitions += 1
        acquisition = self._acquisitions
        got: list[tuple[int, int]] = []  # (offset, delivery count)
        locks_full = False
        expected = -1
        for batch in batches:
            if len(got) >= max_records:
                break
            if 0 <= expected < batch.base_offset:
                self._archive_missing(expected, batch.base_offset)
            expected = batch.last_offset + 1
            if batch.is_control:
                self._archive_missing(batch.base_offset, batch.last_offset + 1)
            for o in range(max(batch.base_offset, self.start_offset), batch.last_offset + 1):
                if len(got) >= max_records:
                    break
                if o >= self.end_offset:
                    if locks_full or o - self.start_offset >= self.limits.max_record_locks:
                        locks_full = True
                        break
                    self.end_offset = o + 1
                    if batch.is_control:
                        self.records[o] = InFlight(RecordState.ARCHIVED, 0)
                        continue
                    self.records[o] = InFlight(RecordState.ACQUIRED, 1, member, acquisition)
                    got.append((o, 1))
                    continue
                r = self.records.get(o)
                if r is None or r.state is not RecordState.AVAILABLE:
                    continue
                r.state = RecordState.ACQUIRED
                r.delivery_count += 1
                r.member = member
                r.acquisition = acquisition
                got.append((o, r.delivery_count))
        self._advance_start()
        if got:
            self.stats.records_acquired += len(got)
            self.stats.records_redelivered += sum(1 for _, count in got if count > 1)
            offsets = [o for o, _ in got]
            self.call_later(self.limits.lock_duration_ms / 1000,
                            lambda: self._lock_timed_out(acquisition, offsets))
        return _ranges(got)

    def _archive_missing(self, first: int, end: int) -> None:
        """Offsets the log does not hold (compacted, a marker) that a loaded state
        had as available: they are never delivered."""
        for o in range(max(first, self.start_offset), min(end, self.end_offset)):
            r = self.records.get(o)
            if r is not None and r.state is RecordState.AVAILABLE:
                r.state = RecordState.ARCHIVED

    # ---- acknowledgements ----------------------------------------------------------

    def acknowledge(self, member: str, batches: Sequence[AckBatch]) -> None:
        """Apply `member`'s acknowledgements, all or none: INVALID_RECORD_STATE when
        one names a record this member does not hold (never acquired, acquired by
        another member, already acknowledged, its lock gone)."""
        for b in batches:
            for o in range(b.first_offset, b.last_offset + 1):
                r = self.records.get(o)
                if b.type_of(o) == AckType.GAP and r is None \
                        and self.start_offset <= o < self.end_offset:
                    continue  # an offset the log does not hold: nothing to do
                if r is None or r.state is not RecordState.ACQUIRED or r.member != member:
                    raise KafkaError(f"record {self.topic}-{self.index}@{o} is not acquired "
                                     f"by member {member}", ErrorCode.invalid_record_state)
        released = False
        renewed: list[int] = []
        for b in batches:
            if len(b.types) == 1:  # counted per range, not per record
                self.stats.acknowledged(b.types[0], b.last_offset - b.first_offset + 1)
            for o in range(b.first_offset, b.last_offset + 1):
                r = self.records.get(o)
                if r is None:
                    continue
                kind = b.type_of(o)
                if len(b.types) > 1:
                    self.stats.acknowledged(kind)
                if kind == AckType.RENEW:
                    renewed.append(o)
                    continue
                if kind == AckType.ACCEPT:
                    r.state = RecordState.ACKNOWLEDGED
                elif kind == AckType.RELEASE:
                    released |= self._release(r)
                else:  # REJECT, GAP
                    r.state = RecordState.ARCHIVED
                r.member = None
        if renewed:
            self._renew(renewed)
        self._advance_start()
        self._changed()
        if released:
            self._wake()

    def _renew(self, offsets: list[int]) -> None:
        """RENEW: the records stay with their member under a new acquisition lock of
        the full duration; the old lock's timer finds them moved on."""
        self._acquisitions += 1
        acquisition = self._acquisitions
        for o in offsets:
            self.records[o].acquisition = acquisition
        self.call_later(self.limits.lock_duration_ms / 1000,
                        lambda: self._lock_timed_out(acquisition, offsets))

    def release_member(self, member: str) -> int:
        """Make every record `member` holds available again (its session closed)."""
        count = 0
        for r in self.records.values():
            if r.state is RecordState.ACQUIRED and r.member == member:
                self._release(r)
                count += 1
        if count:
            self._advance_start()
            self._changed()
            self._wake()
        return count

    # ---- internals -------------------------------------------------------------------

    def _release(self, r: InFlight) -> bool:
        r.member = None
        if r.delivery_count >= self.limits.delivery_count_limit:
            r.state = RecordState.ARCHIVED
            return False
        r.state = RecordState.AVAILABLE
        return True

    def _lock_timed_out(self, acquisition: int, offsets: list[int]) -> None:
        released = False
        timed_out = 0
        for o in offsets:
            r = self.records.get(o)
            if r is not None and r.state is RecordState.ACQUIRED \
                    and r.acquisition == acquisition:
                released |= self._release(r)
                timed_out += 1
        self._advance_start()
        if timed_out:
            self.stats.timed_out((self.group_id, self.topic, self.index), timed_out)
            self._changed()
        if released:
            self._wake()

    def _advance_start(self) -> None:
        records = self.records
        while self.start_offset < self.end_offset:
            r = records.get(self.start_offset)
            if r is not None and r.state not in DONE:
                break
            records.pop(self.start_offset, None)
            self.start_offset += 1

    def _wake(self) -> None:
        for w in list(self.waiters):
            w.complete()

    def states(self) -> dict[int, tuple[RecordState, int]]:
        """offset → (state, delivery count) of the in-flight records (for tests, tools)."""
        return {o: (r.state, r.delivery_count) for o, r in sorted(self.records.items())}


def _ranges(got: list[tuple[int, int]]) -> list[Acquired]:
    out: list[Acquired] = []
    for o, count in got:
        if out and out[-1].last_offset == o - 1 and out[-1].delivery_count == count:
            last = out[-1]
            out[-1] = Acquired(last.first_offset, o, count)
        else:
            out.append(Acquired(o, o, count))
    return out
