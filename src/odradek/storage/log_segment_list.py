"""What hangs on offsets when a log's segment list changes: truncation (a follower
that diverged), retention deleting the oldest segments, the cleaner's swap, the log
start moving forward (DeleteRecords), and the expiry of idle producers.

The segments themselves change in `LocalLog` (local_log.py); this is the part of
Kafka's UnifiedLog above it that keeps the log start, the high watermark, the leader
epochs, the producer state and the transaction indexes in step with them. `Log`
(log.py) takes it in as a base class; it runs on the log's owner thread, under the
log's lock, like the rest of `Log`'s changes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from odradek.protocol.errors import KafkaStorageError, OffsetOutOfRange
from odradek.storage.epochs import LeaderEpochFileCache
from odradek.storage.loader import rebuild_producer_state
from odradek.storage.local_log import LocalLog
from odradek.storage.producer_state import ProducerStateManager
from odradek.storage.segment import LogSegment
from odradek.storage.txn_index import TxnIndexes

log = logging.getLogger(__name__)


class SegmentListChanges:
    """`Log`'s changes to its segment list (a base class of `Log`, never used alone)."""

    # the state of `Log` these changes keep in step
    topic: str
    partition: int
    log_start_offset: int
    closed: bool
    offline: bool
    leader_epochs: LeaderEpochFileCache
    producer_state: ProducerStateManager
    txn_indexes: TxnIndexes
    _high_watermark: int
    _lock: threading.RLock
    _local: LocalLog
    _clock: Callable[[], int]

    if TYPE_CHECKING:  # `Log`'s own, used here

        @property
        def log_end_offset(self) -> int: ...

        def _check_open(self) -> None: ...

        def _io_failed(self, what: str, exc: OSError) -> KafkaStorageError: ...

        def _roll(self, expected_next_offset: int, now: int) -> LogSegment: ...


    def truncate_to(self, offset: int) -> bool:
        """Drop everything from `offset` on (a follower diverged). True if anything went.

        A batch holding `offset` goes whole: the log end becomes its base offset.
        """
        with self._lock:
            self._check_open()
            if offset < 0:
                raise ValueError(f"cannot truncate to negative offset {offset}")
            if offset >= self.log_end_offset:
                return False
            if offset < self._local.first_base_offset:
                self.truncate_fully_and_start_at(offset)
                return True
            now = self._clock()
            self._local.truncate_to(offset, now)
            leo = self.log_end_offset
            self._high_watermark = min(self._high_watermark, leo)
            self.leader_epochs.truncate_from_end(leo)
            segments = self._local.segments
            rebuild_producer_state(segments, self.producer_state, self.log_start_offset, leo, now)
            self.txn_indexes.truncate_to(segments[-1], leo)
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment; the log restarts empty at `offset`."""
        with self._lock:
            self._check_open()
            self._local.truncate_fully_and_start_at(offset, self._clock())
            self.log_start_offset = offset
            self._high_watermark = offset
            self.leader_epochs.clear()
            self.producer_state.truncate_fully_and_start_at(offset)

    def delete_oldest_segments(self, count: int, reason: str) -> int:
        """Remove the `count` oldest segments (retention): the log start moves to the
        base of the segment that follows; the files are renamed `.deleted` and removed
        `file.delete.delay.ms` later. Removing every segment first rolls a new empty
        one, as Kafka does, so the log always has an active segment and its end stays."""
        with self._lock:
            self._check_open()
            segments = self._local.segments
            count = min(count, len(segments))
            try:
                if count == len(segments) and count > 0:
                    if segments[-1].size == 0:
                        count -= 1  # already an empty active segment: it stays
                    else:
                        self._roll(self.log_end_offset, self._clock())
                if count <= 0:
                    return 0
                self.increment_log_start_offset(self._local.segments[count].base_offset)
                doomed = self._local.remove_oldest(count)
                self.producer_state.delete_snapshots_before(self.log_start_offset)
            except OSError as exc:
                raise self._io_failed(f"deleting segments ({reason})", exc) from exc
        log.info(
            "%s-%d: deleted %d segment(s) up to offset %d (%s); log start is now %d",
            self.topic, self.partition, len(doomed), doomed[-1].base_offset, reason,
            self.log_start_offset,
        )  # fmt: skip
        return len(doomed)

    def replace_segments(
        self, cleaned: LogSegment, old: list[LogSegment], truncations: int
    ) -> bool:
        """Swap a cleaned segment in for `old`; False if the log moved on (a truncation,
        a retention delete, a close) and the cleaner must discard its work. See
        LocalLog.replace_segments."""
        with self._lock:
            if self.closed or self.offline:
                return False
            try:
                return self._local.replace_segments(cleaned, old, truncations)
            except OSError as exc:
                raise self._io_failed("swapping in a cleaned segment", exc) from exc

    def increment_log_start_offset(self, offset: int) -> bool:
        """Move the log start forward (DeleteRecords, retention); segments stay until
        retention deletes them."""
        with self._lock:
            if offset > self.log_end_offset:
                raise OffsetOutOfRange(f"log start {offset} beyond log end {self.log_end_offset}")
            if offset <= self.log_start_offset:
                return False
            self.log_start_offset = offset
            self._high_watermark = max(self._high_watermark, offset)
            self.leader_epochs.truncate_from_start(offset)
            self.producer_state.on_log_start_offset_incremented(offset)
            return True

    def purge_deleted_segments(self, now_ms: int | None = None) -> int:
        """Close and remove `.deleted` segments whose `file.delete.delay.ms` is up."""
        return self._local.purge_deleted_segments(self._clock() if now_ms is None else now_ms)

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        with self._lock:
            return self.producer_state.remove_expired_producers(
                self._clock() if now_ms is None else now_ms
            )
