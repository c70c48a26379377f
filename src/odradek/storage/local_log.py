"""`LocalLog`: a partition's segments and files, as Kafka's LocalLog.

It holds the list of segments, the log end offset and the recovery point; it appends
to the active segment, rolls, reads by offset and by timestamp, flushes, truncates,
removes the oldest segments and swaps in cleaned ones. It knows nothing of producers,
leader epochs, transactions, the log start offset or the high watermark: the unified
`Log` above it (log.py) keeps those and calls down.

Threading is the `Log`'s (see log.py): the lock is the log's, handed in; every change
of the segment list runs on the owner thread with it held; reads take no lock, so no
list a reader may hold is mutated except by the owner thread. `flush` may run in a
worker thread and holds the lock only for bookkeeping, never across an fsync. I/O
errors propagate as OSError: the `Log` turns them into KafkaStorageError.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from odradek.protocol.errors import KafkaStorageError
from odradek.storage.checkpoints import fsync_dir
from odradek.storage.deleter import DelayedDeleter
from odradek.storage.file_records import FileRecords
from odradek.storage.log_config import LogConfig
from odradek.storage.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    OffsetAndTimestamp,
    segment_file,
)
from odradek.storage.timestamp_lookup import find_offset_by_timestamp, max_timestamp_record
from odradek.storage.validator import AssignedBatches

log = logging.getLogger(__name__)

__all__ = ["LocalLog", "SegmentRead"]


class SegmentRead(NamedTuple):
    """Whole batches read from one segment."""

    records: bytes | FileRecords
    first_offset: int  # base offset of the first batch, or the offset asked for
    segment_base_offset: int
    position: int


class LocalLog:
    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        log_end_offset: int,
        recovery_point: int,
        clock_ms: Callable[[], int],
        lock: threading.RLock,
    ) -> None:
        self.directory = directory
        self.config = config
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._log_end_offset = log_end_offset
        self.recovery_point = recovery_point
        self._clock = clock_ms
        self._lock = lock
        self._last_flush_ms = clock_ms()
        self._dir_dirty = True  # a segment file may be new since the last dir fsync
        self._max_pos_cache: tuple[int, int, int] | None = None  # (offset, base, position)
        self._truncations = 0  # so a flush racing a truncation does not over-claim
        self._deleter = DelayedDeleter()

    # -------------------------------------------------------------- state

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def first_base_offset(self) -> int:
        return self._bases[0]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def truncations(self) -> int:
        return self._truncations

    def segments_from(self, offset: int) -> list[LogSegment]:
        """The segment holding `offset` (the first one, below it) and those after."""
        return self._segments[max(bisect_right(self._bases, offset) - 1, 0) :]

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        active = self._segments[-1]
        active.resize_indexes(config.segment_index_bytes)
        active.index_interval_bytes = config.index_interval_bytes

    # -------------------------------------------------------------- appends

    def should_roll(self, assigned: AssignedBatches, now: int) -> bool:
        return self._segments[-1].should_roll(
            max_segment_bytes=self.config.segment_bytes,
            max_segment_ms=self.config.max_segment_ms,
            messages_size=assigned.size,
            max_timestamp_in_messages=assigned.max_timestamp,
            max_offset_in_messages=assigned.last_offset,
            now_ms=now,
        )

    def append(self, buf: bytearray | memoryview, assigned: AssignedBatches) -> None:
        """Write batches with their offsets assigned to the active segment."""
        self._segments[-1].append(
            memoryview(buf)[: assigned.size], assigned.infos, assigned.max_timestamp
        )
        self._log_end_offset = assigned.last_offset + 1

    def roll(self, expected_next_offset: int, now: int) -> tuple[LogSegment, bool]:
        """A new active segment at max(expected, log end): (the segment, whether it is
        new — rolling an empty segment onto itself only renews its creation time)."""
        new_offset = max(expected_next_offset, self._log_end_offset)
        active = self._segments[-1]
        if active.base_offset == new_offset and active.size == 0:
            # Kafka recreates it; a fresh creation time is all that changes.
            active.created_ms = now
            return active, False
        if new_offset <= active.base_offset:
            raise KafkaStorageError(f"cannot roll to {new_offset}: {active} is ahead")
        active.on_become_inactive()
        for kind in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            stale = segment_file(self.directory, new_offset, kind)
            if stale.exists():
                log.warning("deleting %s left over where a new segment goes", stale)
                stale.unlink()
        segment = LogSegment(self.directory, new_offset, self.config, now, create=True)
        self._segments.append(segment)
        self._bases.append(new_offset)
        self._dir_dirty = True
        return segment, True

    # -------------------------------------------------------------- reads

    def read(
        self, offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool,
        file_records: bool = False,
    ) -> SegmentRead | None:
        """Whole batches from the one holding `offset`, none holding an offset ≥
        `max_offset`; None when no segment has a batch reaching `offset`."""
        segments = self._segments
        leo = self._log_end_offset
        i = max(bisect_right(self._bases, offset) - 1, 0)
        while i < len(segments):
            seg = segments[i]
            max_position = self._max_position(seg, max_offset, leo)
            data = seg.read(offset, max_bytes, max_position, min_one_batch, file_records)
            if data is not None:
                first = data.first_offset if data.records else offset
                return SegmentRead(data.records, first, seg.base_offset, data.position)
            i += 1
        return None

    def _max_position(self, seg: LogSegment, max_offset: int | None, leo: int) -> int | None:
        """The file position in `seg` that reads must stop at, for `max_offset`."""
        if max_offset is None or max_offset >= leo:
            return None
        j = max(bisect_right(self._bases, max_offset) - 1, 0)
        bound = self._bases[j]
        if seg.base_offset < bound:
            return None
        if seg.base_offset > bound:
            return 0
        cached = self._max_pos_cache
        if cached is not None and cached[0] == max_offset and cached[1] == bound:
            return cached[2]
        found = seg.translate_offset(max_offset)
        position = seg.size if found is None else found.position
        self._max_pos_cache = (max_offset, bound, position)
        return position

    def offset_for_timestamp(self, timestamp: int, start: int) -> OffsetAndTimestamp | None:
        for seg in self._segments:
            if seg.max_timestamp >= timestamp:
                found = find_offset_by_timestamp(seg, timestamp, start)
                if found is not None:
                    return found
        return None

    def latest_timestamp(self) -> OffsetAndTimestamp | None:
        best: LogSegment | None = None
        for seg in self._segments:
            if seg.size and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        return None if best is None else max_timestamp_record(best)

    # -------------------------------------------------------------- durability

    def flush(self, up_to: int | None = None) -> None:
        """fsync everything below `up_to` (default: the log end); the recovery point
        follows. The lock is held only for bookkeeping, never across an fsync."""
        with self._lock:
            leo = self._log_end_offset
            target = leo if up_to is None else min(up_to, leo)
            if target <= self.recovery_point and not self._dir_dirty:
                return
            first = max(bisect_right(self._bases, self.recovery_point) - 1, 0)
            pending = [s for s in self._segments[first:] if s.base_offset < target]
            dir_dirty, self._dir_dirty = self._dir_dirty, False
            truncations = self._truncations
        for seg in pending:
            seg.flush()
        if dir_dirty:
            fsync_dir(self.directory)
        with self._lock:
            # A truncation meanwhile may have replaced what we synced with new data.
            if target > self.recovery_point and truncations == self._truncations:
                self.recovery_point = min(target, self._log_end_offset)
            self._last_flush_ms = self._clock()

    def flush_target(self, now: int) -> int | None:
        """Where the flush timer should flush to now, or None: a rolled segment not yet
        synced (its base), or `flush.messages` / `flush.ms` reached (the log end).
        Plain reads, no lock (a stale value is seen at the next tick): it runs for
        every log every second, so it is kept to a few attribute reads."""
        rp = self.recovery_point
        leo = self._log_end_offset
        if leo <= rp:
            return None
        active = self._segments[-1].base_offset
        if rp < active:
            return active
        config = self.config
        if leo - rp >= config.flush_messages or now - self._last_flush_ms >= config.flush_ms:
            return leo
        return None

    def flush_due(self) -> bool:
        """Whether `flush.messages` or `flush.ms` asks for a flush now."""
        unflushed = self._log_end_offset - self.recovery_point
        if unflushed <= 0:
            return False
        return (
            unflushed >= self.config.flush_messages
            or self._clock() - self._last_flush_ms >= self.config.flush_ms
        )

    # -------------------------------------------------------------- segment list changes

    def truncate_to(self, offset: int, now: int) -> None:
        """Drop every batch from the one holding `offset` on; `offset` is at or above
        the first segment's base and below the log end."""
        while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
            self._segments.pop().delete()
            self._bases.pop()
        active = self._segments[-1]
        active.truncate_to(offset, now)
        active.resize_indexes(self.config.segment_index_bytes)
        active.index_interval_bytes = self.config.index_interval_bytes
        self._log_end_offset = active.next_offset
        self._truncated()

    def truncate_fully_and_start_at(self, offset: int, now: int) -> None:
        """Delete every segment; one empty segment at `offset` replaces them."""
        for seg in self._segments:
            seg.delete()
        self._segments = [LogSegment(self.directory, offset, self.config, now, create=True)]
        self._bases = [offset]
        self._dir_dirty = True
        self._log_end_offset = offset
        self._truncated()
        self.recovery_point = offset

    def _truncated(self) -> None:
        self._truncations += 1
        self.recovery_point = min(self.recovery_point, self._log_end_offset)
        self._max_pos_cache = None

    def remove_oldest(self, count: int) -> list[LogSegment]:
        """Take the `count` oldest segments (never all) out of the log; their files are
        renamed `.deleted` and removed `file.delete.delay.ms` later."""
        doomed = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        self._max_pos_cache = None
        self._dir_dirty = True
        self._delete_later(doomed)
        return doomed

    def replace_segments(
        self, cleaned: LogSegment, old: list[LogSegment], truncations: int
    ) -> bool:
        """Swap a flushed `.cleaned` segment in for the consecutive segments `old`, which
        go `.deleted` (Kafka's replaceSegments). Crash safe: `.cleaned` → `.swap`, the
        old files renamed, `.swap` → live; the loader completes a swap cut short.

        False, changing nothing, when the log moved on meanwhile (a truncation, a
        retention delete) or `old` is not exactly a run of live non-active segments."""
        if truncations != self._truncations or not old:
            return False
        n = len(old)
        try:
            i = self._segments.index(old[0])
        except ValueError:
            return False
        if i + n >= len(self._segments) or self._segments[i : i + n] != old:
            return False
        cleaned.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        self._segments[i : i + n] = [cleaned]
        self._bases[i : i + n] = [cleaned.base_offset]
        self._max_pos_cache = None
        self._delete_later(old)
        cleaned.change_file_suffixes(SWAP_SUFFIX, "")
        fsync_dir(self.directory)
        return True

    def _delete_later(self, segments: list[LogSegment]) -> None:
        self._deleter.schedule(segments, self._clock(), self.config.file_delete_delay_ms)

    def purge_deleted_segments(self, now_ms: int) -> int:
        return self._deleter.purge(now_ms)

    # -------------------------------------------------------------- lifecycle

    def flush_for_close(self) -> None:
        """What a clean shutdown needs of the files before they close: `.deleted`
        segments gone, the final time index entry, everything synced."""
        self._deleter.purge_all()
        active = self._segments[-1]
        active.append_final_time_index_entry()
        self.flush()
        active.flush()

    def close(self) -> None:
        for seg in self._segments:
            seg.close()

    def close_handles(self) -> None:
        """Close the file handles only, as a crash would leave them."""
        for seg in self._segments:
            seg.close_handles()
        self._deleter.purge_all(remove_files=False)
