"""`Log`: one partition — its segments, offsets, producer state and leader epochs.

Named and shaped after Kafka's UnifiedLog/LocalLog. Offsets are assigned here,
contiguously from the log end offset; the high watermark and last stable offset come
from above (replication) and are only stored and honoured by `read(max_offset=…)`.

Threading: one thread (the broker's event loop, "the owner") appends, reads, truncates
and changes the segment list (retention deletes, the cleaner's swap); `flush` may run in
a worker thread meanwhile — it holds the lock only for bookkeeping, never across an
fsync. The log cleaner reads old segments from its own threads and hands the swap of
the cleaned segment to the owner. Reads take no lock, which is why the segment list
only changes on the owner thread. Segments that leave the log are renamed `.deleted`
and closed and removed `file.delete.delay.ms` later, as in Kafka.

An I/O error marks the log offline (`on_io_error` tells the log manager, which takes
the whole log dir offline); from then on every operation raises KafkaStorageError.
"""

from __future__ import annotations

import logging
import shutil
import threading
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path

from odradek.protocol.errors import (
    KafkaStorageError,
    OffsetOutOfRange,
    RecordListTooLarge,
)
from odradek.storage import log_changes, transactions
from odradek.storage.checkpoints import fsync_dir
from odradek.storage.deleter import DelayedDeleter
from odradek.storage.epochs import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from odradek.storage.loader import LogLoader
from odradek.storage.log_config import LogConfig
from odradek.storage.log_types import AppendInfo, ReadResult, parse_topic_partition
from odradek.storage.log_types import now_ms as _now_ms
from odradek.storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    AppendOrigin,
    ProducerStateManager,
)
from odradek.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    OffsetAndTimestamp,
    segment_file,
)
from odradek.storage.txn_index import TxnIndexes
from odradek.storage.validator import (
    AssignedBatches,
    assign_offsets,
    describe_follower_batches,
    recompress_if_needed,
    validate_for_follower,
    validate_for_leader,
)

log = logging.getLogger(__name__)

__all__ = ["AppendInfo", "Log", "OffsetAndTimestamp", "ReadResult", "parse_topic_partition"]


class Log:
    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        log_start_offset: int,
        log_end_offset: int,
        recovery_point: int,
        leader_epochs: LeaderEpochFileCache,
        producer_state: ProducerStateManager,
        clock_ms: Callable[[], int],
    ) -> None:
        self.directory = directory
        self.topic, self.partition = parse_topic_partition(directory.name)
        self.config = config
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self.log_start_offset = log_start_offset
        self._log_end_offset = log_end_offset
        self.recovery_point = recovery_point
        self._high_watermark = log_start_offset
        # the high watermark replication-offset-checkpoint had at start-up, if any
        self.recovered_high_watermark: int | None = None
        self.leader_epochs = leader_epochs
        self.producer_state = producer_state
        self._clock = clock_ms
        self._lock = threading.RLock()
        self._last_flush_ms = clock_ms()
        self._dir_dirty = True  # a segment file may be new since the last dir fsync
        self._max_pos_cache: tuple[int, int, int] | None = None  # (offset, base, position)
        self._truncations = 0  # so a flush racing a truncation does not over-claim
        self.closed = False
        self.offline = False  # its log dir failed: every operation raises
        self.on_io_error: Callable[[Log, OSError], None] | None = None
        self._deleter = DelayedDeleter()
        self.txn_indexes = TxnIndexes()  # the segments' aborted transactions (.txnindex)

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = False,
        clock_ms: Callable[[], int] = _now_ms,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> Log:
        """Open (creating if needed) a partition directory, recovering it if need be."""
        parse_topic_partition(directory.name)
        directory.mkdir(parents=True, exist_ok=True)
        epochs = LeaderEpochFileCache(directory / LEADER_EPOCH_CHECKPOINT)
        producers = ProducerStateManager(
            directory, producer_id_expiration_ms=producer_id_expiration_ms
        )
        loaded = LogLoader(
            directory,
            config,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            clean_shutdown=clean_shutdown,
            now_ms=clock_ms(),
            leader_epochs=epochs,
            producer_state=producers,
        ).load()
        return cls(
            directory,
            config,
            loaded.segments,
            log_start_offset=loaded.log_start_offset,
            log_end_offset=loaded.log_end_offset,
            recovery_point=loaded.recovery_point,
            leader_epochs=epochs,
            producer_state=producers,
            clock_ms=clock_ms,
        )

    def __repr__(self) -> str:
        return (
            f"Log({self.topic}-{self.partition}, start={self.log_start_offset}, "
            f"end={self._log_end_offset}, segments={len(self._segments)})"
        )

    # -------------------------------------------------------------- state

    @property
    def log_end_offset(self) -> int:
        """The next offset to be assigned."""
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._high_watermark = min(max(offset, self.log_start_offset), self._log_end_offset)

    @property
    def last_stable_offset(self) -> int:
        """Below the oldest open transaction and the high watermark: what
        read_committed consumers may read."""
        return transactions.last_stable_offset(self)

    def collect_aborted_transactions(self, start: int, records: bytes) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping `records`,
        read from `start`: what a read_committed fetch returns with them."""
        return transactions.collect_aborted(self, start, records)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def lock(self) -> threading.RLock:
        """Held while appending and while the segment list changes."""
        return self._lock

    @property
    def truncations(self) -> int:
        """Bumped by every truncation: work planned on old segments checks it."""
        return self._truncations

    def update_config(self, config: LogConfig) -> None:
        """New topic configs take effect at once (the next append, roll or read)."""
        with self._lock:
            self.config = config
            active = self._segments[-1]
            active.resize_indexes(config.segment_index_bytes)
            active.index_interval_bytes = config.index_interval_bytes

    def _check_open(self) -> None:
        if self.offline:
            raise KafkaStorageError(
                f"{self.topic}-{self.partition} is offline: its log dir "
                f"{self.directory.parent} failed"
            )
        if self.closed:
            raise KafkaStorageError(f"log {self.topic}-{self.partition} is closed")

    def _io_failed(self, what: str, exc: OSError) -> KafkaStorageError:
        """Report an I/O error (the log manager takes the dir offline) and describe it."""
        log.error("%s-%d: %s failed: %s", self.topic, self.partition, what, exc)
        self.offline = True
        if self.on_io_error is not None:
            self.on_io_error(self, exc)
        return KafkaStorageError(f"{what} of {self.topic}-{self.partition} failed: {exc}")

    def mark_offline(self) -> None:
        """Its log dir failed: refuse every operation from now on. The file handles
        stay open (closing them under a reader could hand its fd to another file)."""
        self.offline = True

    # -------------------------------------------------------------- appends

    def append_as_leader(
        self,
        records: bytearray | memoryview | bytes,
        leader_epoch: int,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendInfo:
        """Validate, assign offsets in place, write. Raises a KafkaError (and writes
        nothing) when a batch is refused; an idempotent retry returns the original's
        offsets with `duplicate=True`."""
        buf = records if isinstance(records, bytearray) else memoryview(records)
        if isinstance(buf, memoryview) and buf.readonly:
            buf = bytearray(buf)  # offsets are assigned in place
        now = self._clock()
        config = self.config
        batches = validate_for_leader(buf, config, now, f"{self.topic}-{self.partition}")
        buf, batches = recompress_if_needed(buf, batches, config)
        self._check_fits_a_segment(batches[-1][0] + batches[-1][1].size)
        log_append_time = now if config.log_append_time else None
        with self._lock:
            self._check_open()
            first = self._log_end_offset
            updates, duplicate = self.producer_state.analyze_batches(
                batches, first, log_append_time, origin
            )
            if duplicate is not None:
                return AppendInfo(
                    first_offset=duplicate.first_offset,
                    last_offset=duplicate.last_offset,
                    max_timestamp=duplicate.timestamp,
                    offset_of_max_timestamp=duplicate.last_offset,
                    log_append_time=duplicate.timestamp if log_append_time is not None else -1,
                    log_start_offset=self.log_start_offset,
                    records_count=duplicate.offset_delta + 1,
                    duplicate=True,
                )
            assigned = assign_offsets(buf, batches, first, leader_epoch, log_append_time)
            if leader_epoch >= 0:
                self.leader_epochs.assign(leader_epoch, first)
            self._append(buf, assigned, now)
            for info in updates.values():
                self.producer_state.update(info)
            return self._append_info(assigned)

    def append_as_follower(self, records: bytearray | memoryview | bytes) -> AppendInfo:
        """Append replicated batches as they are (offsets, epochs, timestamps set by the
        leader): checks CRCs and that offsets rise from the log end. A trailing partial
        batch is ignored."""
        buf = records if isinstance(records, bytearray) else memoryview(records)
        with self._lock:
            self._check_open()
            batches = validate_for_follower(buf, self._log_end_offset)
            if not batches:
                end = self._log_end_offset
                return AppendInfo(end, end - 1, -1, -1, -1, self.log_start_offset, 0)
            assigned = describe_follower_batches(batches)
            self._check_fits_a_segment(assigned.size)
            for _, h in batches:
                if h.partition_leader_epoch >= 0:
                    self.leader_epochs.assign(h.partition_leader_epoch, h.base_offset)
            now = self._clock()
            self._append(buf, assigned, now)
            transactions.replay_appended(self, buf, batches)
            return self._append_info(assigned)

    def append_marker(self, *, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                      commit: bool, leader_epoch: int) -> AppendInfo:
        """Write a transaction marker (the coordinator's commit or abort); see
        transactions.append_marker."""
        return transactions.append_marker(
            self, producer_id=producer_id, producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch, commit=commit, leader_epoch=leader_epoch)

    def _append_info(self, assigned: AssignedBatches) -> AppendInfo:
        return AppendInfo(
            first_offset=assigned.first_offset,
            last_offset=assigned.last_offset,
            max_timestamp=assigned.max_timestamp,
            offset_of_max_timestamp=assigned.offset_of_max_timestamp,
            log_append_time=assigned.log_append_time,
            log_start_offset=self.log_start_offset,
            records_count=assigned.records_count,
        )

    def _check_fits_a_segment(self, size: int) -> None:
        if size > self.config.segment_bytes:
            raise RecordListTooLarge(
                f"{size} bytes is more than segment.bytes={self.config.segment_bytes}"
            )

    def _append(self, buf: bytearray | memoryview, assigned: AssignedBatches, now: int) -> None:
        try:
            segment = self._maybe_roll(assigned, now)
            segment.append(memoryview(buf)[: assigned.size], assigned.infos, assigned.max_timestamp)
        except OSError as exc:
            raise self._io_failed("append", exc) from exc
        self._log_end_offset = assigned.last_offset + 1
        self.producer_state.update_map_end_offset(self._log_end_offset)

    def _maybe_roll(self, assigned: AssignedBatches, now: int) -> LogSegment:
        active = self._segments[-1]
        if active.should_roll(
            max_segment_bytes=self.config.segment_bytes,
            max_segment_ms=self.config.max_segment_ms,
            messages_size=assigned.size,
            max_timestamp_in_messages=assigned.max_timestamp,
            max_offset_in_messages=assigned.last_offset,
            now_ms=now,
        ):
            return self._roll(assigned.first_offset, now)
        return active

    def roll(self) -> LogSegment:
        """Start a new segment at the log end (Kafka's force roll)."""
        with self._lock:
            self._check_open()
            try:
                return self._roll(self._log_end_offset, self._clock())
            except OSError as exc:
                raise self._io_failed("roll", exc) from exc

    def _roll(self, expected_next_offset: int, now: int) -> LogSegment:
        new_offset = max(expected_next_offset, self._log_end_offset)
        active = self._segments[-1]
        if active.base_offset == new_offset and active.size == 0:
            # Rolling an empty segment onto itself: Kafka recreates it; a fresh
            # creation time is all that changes.
            active.created_ms = now
            return active
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
        self.producer_state.update_map_end_offset(new_offset)
        # Not fsynced (Kafka writes it asynchronously): the loader drops a torn one.
        self.producer_state.take_snapshot(sync=False)
        return segment

    # -------------------------------------------------------------- reads

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> ReadResult:
        """Whole batches from the one holding `offset`, up to `max_bytes` (the first
        batch whole even if larger, when `min_one_batch` — KIP-74), none holding an
        offset ≥ `max_offset` (the high watermark or LSO for consumers).

        OffsetOutOfRange outside [log start, log end]; empty at the log end.
        """
        self._check_open()
        leo = self._log_end_offset
        start = self.log_start_offset
        if offset < start or offset > leo:
            raise OffsetOutOfRange(
                f"offset {offset} is outside [{start}, {leo}] of {self.topic}-{self.partition}"
            )
        segments, bases = self._segments, self._bases
        i = max(bisect_right(bases, offset) - 1, 0)
        empty = ReadResult(b"", offset, start, leo, self._high_watermark)
        if offset == leo or (max_offset is not None and offset >= max_offset):
            return empty
        while i < len(segments):
            seg = segments[i]
            try:
                max_position = self._max_position(seg, max_offset, leo)
                data = seg.read(offset, max_bytes, max_position, min_one_batch)
            except OSError as exc:
                raise self._io_failed("read", exc) from exc
            if data is not None:
                return ReadResult(
                    data.records,
                    data.first_offset if data.records else offset,
                    start,
                    leo,
                    self._high_watermark,
                    seg.base_offset,
                    data.position,
                )
            i += 1
        return empty

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

    def offset_for_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """(offset, timestamp, leader epoch) of the first record with a timestamp ≥
        `timestamp` (ListOffsets with a time); None when every record is older."""
        self._check_open()
        try:
            for seg in self._segments:
                if seg.max_timestamp >= timestamp:
                    found = seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
                    if found is not None:
                        return found
        except OSError as exc:
            raise self._io_failed("timestamp lookup", exc) from exc
        return None

    def latest_timestamp(self) -> OffsetAndTimestamp | None:
        """The largest timestamp and the first record carrying it (MAX_TIMESTAMP)."""
        self._check_open()
        best: LogSegment | None = None
        try:
            for seg in self._segments:
                if seg.size and (best is None or seg.max_timestamp > best.max_timestamp):
                    best = seg
            return None if best is None else best.max_timestamp_record()
        except OSError as exc:
            raise self._io_failed("timestamp lookup", exc) from exc

    def epoch_for_offset(self, offset: int) -> int:
        epoch = self.leader_epochs.epoch_for_offset(offset)
        return -1 if epoch is None else epoch

    # -------------------------------------------------------------- durability

    def flush(self, up_to: int | None = None) -> None:
        """fsync everything below `up_to` (default: the log end); the recovery point
        follows. Safe to call from a worker thread while the loop appends."""
        with self._lock:
            if self.offline:
                return
            leo = self._log_end_offset
            target = leo if up_to is None else min(up_to, leo)
            if target <= self.recovery_point and not self._dir_dirty:
                return
            first = max(bisect_right(self._bases, self.recovery_point) - 1, 0)
            pending = [s for s in self._segments[first:] if s.base_offset < target]
            dir_dirty, self._dir_dirty = self._dir_dirty, False
            truncations = self._truncations
        try:
            for seg in pending:
                seg.flush()
            if dir_dirty:
                fsync_dir(self.directory)
        except OSError as exc:
            raise self._io_failed("flush", exc) from exc
        with self._lock:
            # A truncation meanwhile may have replaced what we synced with new data.
            if target > self.recovery_point and truncations == self._truncations:
                self.recovery_point = min(target, self._log_end_offset)
            self._last_flush_ms = self._clock()

    def maybe_flush(self) -> bool:
        """Flush if `flush.messages` or `flush.ms` says so; cheap when it does not."""
        unflushed = self._log_end_offset - self.recovery_point
        if unflushed <= 0:
            return False
        if (
            unflushed >= self.config.flush_messages
            or self._clock() - self._last_flush_ms >= self.config.flush_ms
        ):
            self.flush()
            return True
        return False

    @property
    def unflushed_messages(self) -> int:
        return self._log_end_offset - self.recovery_point

    # -------------------------------------------------------------- segment list changes
    # The changes themselves live in log_changes.py, which works on this class's state.

    def truncate_to(self, offset: int) -> bool:
        """Drop everything from `offset` on (a follower diverged). True if anything went.

        A batch holding `offset` goes whole: the log end becomes its base offset.
        """
        return log_changes.truncate_to(self, offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment; the log restarts empty at `offset`."""
        log_changes.truncate_fully_and_start_at(self, offset)

    def delete_oldest_segments(self, count: int, reason: str) -> int:
        """Remove the `count` oldest segments (retention); see log_changes."""
        return log_changes.delete_oldest_segments(self, count, reason)

    def replace_segments(
        self, cleaned: LogSegment, old: list[LogSegment], truncations: int
    ) -> bool:
        """Swap a cleaned segment in for `old`; False if the log moved on. See log_changes."""
        return log_changes.replace_segments(self, cleaned, old, truncations)

    def increment_log_start_offset(self, offset: int) -> bool:
        """Move the log start forward (DeleteRecords, retention); segments stay until
        retention deletes them."""
        with self._lock:
            if offset > self._log_end_offset:
                raise OffsetOutOfRange(f"log start {offset} beyond log end {self._log_end_offset}")
            if offset <= self.log_start_offset:
                return False
            self.log_start_offset = offset
            self._high_watermark = max(self._high_watermark, offset)
            self.leader_epochs.truncate_from_start(offset)
            self.producer_state.on_log_start_offset_incremented(offset)
            return True

    def _delete_later(self, segments: list[LogSegment]) -> None:
        self._deleter.schedule(segments, self._clock(), self.config.file_delete_delay_ms)

    def purge_deleted_segments(self, now_ms: int | None = None) -> int:
        """Close and remove `.deleted` segments whose `file.delete.delay.ms` is up."""
        return self._deleter.purge(self._clock() if now_ms is None else now_ms)

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        with self._lock:
            return self.producer_state.remove_expired_producers(
                self._clock() if now_ms is None else now_ms
            )

    # -------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Flush everything, snapshot producer state at the log end, close the files.
        What a clean shutdown needs so the next open trusts the files."""
        with self._lock:
            if self.closed:
                return
            if self.offline:
                self.close_without_flush()  # nothing can be written to a failed dir
                return
            self._deleter.purge_all()
            active = self._segments[-1]
            active.append_final_time_index_entry()
            self.flush()
            active.flush()
            self.producer_state.update_map_end_offset(self._log_end_offset)
            self.producer_state.take_snapshot(sync=True)
            for seg in self._segments:
                seg.close()
            self.closed = True

    def close_without_flush(self) -> None:
        """Close the file handles only, as a crash would leave them (tests, failed disks)."""
        with self._lock:
            for seg in self._segments:
                seg.close_handles()
            self._deleter.purge_all(remove_files=False)
            self.closed = True

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        with self._lock:
            self.close_without_flush()
            shutil.rmtree(self.directory, ignore_errors=True)
