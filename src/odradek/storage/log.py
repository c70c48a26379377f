"""`Log`: one partition — offsets, producer state, leader epochs, transactions — over
its segments.

Split as Kafka splits it: this is the UnifiedLog (the log start offset, the high
watermark and last stable offset, producer state, leader epochs, the transaction
indexes, validation and offset assignment), with what follows a change of the segment
list (truncation, retention, the cleaner's swap) in log_segment_list.py; `LocalLog`
(local_log.py) below it holds the segments and files (append, roll, read by offset or
time, flush, truncate, delete).
Offsets are assigned here, contiguously from the log end offset; the high watermark
and last stable offset come from above (replication) and are only stored and
honoured by `read(max_offset=…)`.

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
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path

from odradek.protocol.batch import BatchHeader
from odradek.protocol.errors import (
    KafkaStorageError,
    OffsetOutOfRange,
    RecordListTooLarge,
)
from odradek.storage import transactions
from odradek.storage.file_records import FileRecords
from odradek.storage.flush_queue import FlushQueue
from odradek.storage.loader import LoadedPartition, load_partition
from odradek.storage.local_log import LocalLog
from odradek.storage.log_config import LogConfig
from odradek.storage.log_segment_list import SegmentListChanges
from odradek.storage.log_types import AppendInfo, ReadResult, parse_topic_partition
from odradek.storage.log_types import now_ms as _now_ms
from odradek.storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    AppendOrigin,
)
from odradek.storage.segment import LogSegment, OffsetAndTimestamp
from odradek.storage.txn_index import AbortedTxnEntry, TxnIndexes
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


class Log(SegmentListChanges):
    def __init__(self, directory: Path, config: LogConfig, loaded: LoadedPartition,
                 clock_ms: Callable[[], int]) -> None:
        """A log as `LogLoader` left it (use `Log.open`)."""
        self.directory = directory
        self.topic, self.partition = parse_topic_partition(directory.name)
        self.config = config
        self._lock = threading.RLock()
        self._local = LocalLog(
            directory, config, loaded.segments, log_end_offset=loaded.log_end_offset,
            recovery_point=loaded.recovery_point, clock_ms=clock_ms, lock=self._lock,
        )  # fmt: skip
        self.log_start_offset = loaded.log_start_offset
        self._high_watermark = loaded.log_start_offset
        # the high watermark replication-offset-checkpoint had at start-up, if any
        self.recovered_high_watermark: int | None = None
        self.leader_epochs = loaded.leader_epochs
        self.producer_state = loaded.producer_state
        self._clock = clock_ms
        self.closed = False
        self.offline = False  # its log dir failed: every operation raises
        self.on_io_error: Callable[[Log, OSError], None] | None = None
        # after each append: the log manager's flush timer visits only appended logs
        self.on_append: Callable[[Log], None] | None = None
        self.txn_indexes = TxnIndexes()  # the segments' aborted transactions (.txnindex)
        self.flushes = FlushQueue()  # the log manager gives it the flusher thread

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
        must_exist: bool = False,
        new: bool = False,
    ) -> Log:
        """Open (creating if needed) a partition directory, recovering it if need be
        (loader.load_partition). `must_exist`: FileNotFoundError rather than an empty
        log if the dir is gone (a partition found at start-up and removed meanwhile)."""
        loaded = load_partition(
            directory, config, recovery_point=recovery_point,
            log_start_offset=log_start_offset, clean_shutdown=clean_shutdown,
            now_ms=clock_ms(), producer_id_expiration_ms=producer_id_expiration_ms,
            must_exist=must_exist, new=new,
        )  # fmt: skip
        return cls(directory, config, loaded, clock_ms)

    def __repr__(self) -> str:
        return (
            f"Log({self.topic}-{self.partition}, start={self.log_start_offset}, "
            f"end={self.log_end_offset}, segments={len(self._local.segments)})"
        )

    # -------------------------------------------------------------- state

    @property
    def log_end_offset(self) -> int:
        """The next offset to be assigned."""
        return self._local.log_end_offset

    @property
    def recovery_point(self) -> int:
        """Everything below is flushed: recovery after a crash starts here."""
        return self._local.recovery_point

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)

    @property
    def last_stable_offset(self) -> int:
        """Below the oldest open transaction and the high watermark: what
        read_committed consumers may read."""
        return transactions.last_stable_offset(
            self._high_watermark, self.producer_state.first_unstable_offset,
            self.log_start_offset,
        )  # fmt: skip

    def collect_aborted_transactions(self, start: int, records: bytes | FileRecords
                                     ) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping `records`,
        read from `start`: what a read_committed fetch returns with them."""
        if not records:
            return []
        upper = records.next_offset if isinstance(records, FileRecords) else \
            lambda: transactions.next_offset_after(records)
        return self.txn_indexes.collect(self._local.segments_from(start), start, upper)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._local.segments

    @property
    def active_segment(self) -> LogSegment:
        return self._local.active_segment

    @property
    def size_in_bytes(self) -> int:
        return self._local.size_in_bytes

    @property
    def lock(self) -> threading.RLock:
        """Held while appending and while the segment list changes."""
        return self._lock

    @property
    def truncations(self) -> int:
        """Bumped by every truncation: work planned on old segments checks it."""
        return self._local.truncations

    def update_config(self, config: LogConfig) -> None:
        """New topic configs take effect at once (the next append, roll or read)."""
        with self._lock:
            self.config = config
            self._local.update_config(config)

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
            first = self.log_end_offset
            updates, duplicate = self.producer_state.analyze_batches(
                batches, first, log_append_time, origin
            )
            if duplicate is not None:
                return AppendInfo.of_duplicate(
                    duplicate.first_offset, duplicate.last_offset, duplicate.timestamp,
                    self.log_start_offset, log_append_time is not None)
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
            batches = validate_for_follower(buf, self.log_end_offset)
            if not batches:
                end = self.log_end_offset
                return AppendInfo(end, end - 1, -1, -1, -1, self.log_start_offset, 0)
            assigned = describe_follower_batches(batches)
            self._check_fits_a_segment(assigned.size)
            for _, h in batches:
                if h.partition_leader_epoch >= 0:
                    self.leader_epochs.assign(h.partition_leader_epoch, h.base_offset)
            now = self._clock()
            self._append(buf, assigned, now)
            self._replay_appended(buf, batches)
            return self._append_info(assigned)

    def append_marker(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        leader_epoch: int,
        origin: AppendOrigin = AppendOrigin.COORDINATOR,
    ) -> AppendInfo:
        """Write a COMMIT or ABORT marker (the coordinator's) for the producer at the log
        end; an ABORT that closes a transaction is indexed in the `.txnindex`.

        Raises InvalidProducerEpoch when the producer already wrote with a newer epoch (a
        marker from a coordinator that lost track), KafkaStorageError on I/O failure.
        """
        now = self._clock()
        batch, header = transactions.marker_batch(
            commit=commit, producer_id=producer_id, producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch, timestamp=now,
        )  # fmt: skip
        with self._lock:
            self._check_open()
            offset = self.log_end_offset
            info = self.producer_state.prepare_update(producer_id, origin)
            first = info.append_end_txn_marker(producer_epoch, offset, now, coordinator_epoch)
            assigned = assign_offsets(batch, [(0, header)], offset, leader_epoch, None)
            if leader_epoch >= 0:
                self.leader_epochs.assign(leader_epoch, offset)
            self._append(batch, assigned, now)
            self.producer_state.update(info)
            if first is not None and not commit:
                self._index_abort(producer_id, first, offset)
            return self._append_info(assigned)

    def _index_abort(self, producer_id: int, first: int, marker_offset: int) -> None:
        """Record an aborted transaction in the active segment's `.txnindex`, with the
        LSO it left behind (the next open transaction's first offset, or past the marker)."""
        unstable = self.producer_state.first_unstable_offset
        lso = marker_offset + 1 if unstable is None else unstable
        try:
            self.txn_indexes.append(
                self._local.active_segment, AbortedTxnEntry(producer_id, first, marker_offset, lso)
            )
        except OSError as exc:
            raise self._io_failed("transaction index append", exc) from exc

    def _replay_appended(
        self, buf: bytearray | memoryview, batches: Sequence[tuple[int, BatchHeader]]
    ) -> None:
        """Producer state for batches appended as they are (a follower's append), with
        the `.txnindex` entries of the aborts among them. Called with the lock held."""
        for pid, first, marker_offset in transactions.replay(self.producer_state, buf, batches):
            self._index_abort(pid, first, marker_offset)

    def _append_info(self, assigned: AssignedBatches) -> AppendInfo:
        return AppendInfo(assigned.first_offset, assigned.last_offset, assigned.max_timestamp,
                          assigned.offset_of_max_timestamp, assigned.log_append_time,
                          self.log_start_offset, assigned.records_count)

    def _check_fits_a_segment(self, size: int) -> None:
        if size > self.config.segment_bytes:
            raise RecordListTooLarge(
                f"{size} bytes is more than segment.bytes={self.config.segment_bytes}"
            )

    def _append(self, buf: bytearray | memoryview, assigned: AssignedBatches, now: int) -> None:
        try:
            if self._local.should_roll(assigned, now):
                self._roll(assigned.first_offset, now)
            self._local.append(buf, assigned)
        except OSError as exc:
            raise self._io_failed("append", exc) from exc
        self.producer_state.update_map_end_offset(self.log_end_offset)
        if self.on_append is not None:
            self.on_append(self)

    def roll(self) -> LogSegment:
        """Start a new segment at the log end (Kafka's force roll)."""
        with self._lock:
            self._check_open()
            try:
                return self._roll(self.log_end_offset, self._clock())
            except OSError as exc:
                raise self._io_failed("roll", exc) from exc

    def _roll(self, expected_next_offset: int, now: int) -> LogSegment:
        segment, new = self._local.roll(expected_next_offset, now)
        if new:
            self.producer_state.update_map_end_offset(segment.base_offset)
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
        file_records: bool = False,
    ) -> ReadResult:
        """Whole batches from the one holding `offset`, up to `max_bytes` (the first
        batch whole even if larger, when `min_one_batch` — KIP-74), none holding an
        offset ≥ `max_offset` (the high watermark or LSO for consumers). With
        `file_records` the batches stay in the file: a `FileRecords` slice to send.

        OffsetOutOfRange outside [log start, log end]; empty at the log end.
        """
        self._check_open()
        leo = self.log_end_offset
        start = self.log_start_offset
        if offset < start or offset > leo:
            raise OffsetOutOfRange(
                f"offset {offset} is outside [{start}, {leo}] of {self.topic}-{self.partition}"
            )
        data = None
        if offset != leo and (max_offset is None or offset < max_offset):
            try:
                data = self._local.read(offset, max_bytes, max_offset, min_one_batch,
                                        file_records)
            except OSError as exc:
                raise self._io_failed("read", exc) from exc
        if data is None:
            return ReadResult(b"", offset, start, leo, self._high_watermark)
        return ReadResult(
            data.records, data.first_offset, start, leo, self._high_watermark,
            data.segment_base_offset, data.position,
        )  # fmt: skip

    def offset_for_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """(offset, timestamp, leader epoch) of the first record with a timestamp ≥
        `timestamp` (ListOffsets with a time); None when every record is older."""
        self._check_open()
        try:
            return self._local.offset_for_timestamp(timestamp, self.log_start_offset)
        except OSError as exc:
            raise self._io_failed("timestamp lookup", exc) from exc

    def latest_timestamp(self) -> OffsetAndTimestamp | None:
        """The largest timestamp and the first record carrying it (MAX_TIMESTAMP)."""
        self._check_open()
        try:
            return self._local.latest_timestamp()
        except OSError as exc:
            raise self._io_failed("timestamp lookup", exc) from exc

    def epoch_for_offset(self, offset: int) -> int:
        epoch = self.leader_epochs.epoch_for_offset(offset)
        return -1 if epoch is None else epoch

    # -------------------------------------------------------------- durability

    def flush(self, up_to: int | None = None) -> None:
        """fsync everything below `up_to` (default: the log end); the recovery point
        follows. Safe to call from a worker thread while the loop appends."""
        if self.offline or self.closed:
            return
        try:
            # the epochs of what becomes durable first: recovery trusts the file below
            # the recovery point
            self.leader_epochs.sync()
            self._local.flush(up_to)
        except OSError as exc:
            raise self._io_failed("flush", exc) from exc

    def flush_target(self, now_ms: int) -> int | None:
        """The flush timer's question (LocalLog.flush_target); None when offline."""
        return None if self.offline or self.closed else self._local.flush_target(now_ms)

    def maybe_flush(self) -> bool:
        """After an append: `flush.messages` reached asks for a flush, queued to the
        flusher thread when there is one (the produce handler awaits `pending_flush`
        before acknowledging), done here otherwise. True if it flushed here."""
        if self.log_end_offset - self.recovery_point < self.config.flush_messages:
            return False
        if self.flushes.executor is not None:
            self.flushes.request(self.flush)
            return False
        self.flush()
        return True

    @property
    def pending_flush(self) -> Future[None] | None:
        """The queued flush that makes everything appended so far durable, if any."""
        return self.flushes.pending

    def flush_if_due(self) -> bool:
        """The flush timer: flush if `flush.messages` or `flush.ms` says so."""
        if not self._local.flush_due():
            return False
        self.flush()
        return True

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self.recovery_point

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
            try:
                self.leader_epochs.sync()
                self._local.flush_for_close()
            except OSError as exc:
                raise self._io_failed("flush", exc) from exc
            self.producer_state.update_map_end_offset(self.log_end_offset)
            self.producer_state.take_snapshot(sync=True)
            self._local.close()
            if self.leader_epochs.unsaved:
                self.leader_epochs.flush()
            self.closed = True

    def close_without_flush(self) -> None:
        """Close the file handles only, as a crash would leave them (tests, failed disks)."""
        with self._lock:
            self._local.close_handles()
            self.closed = True

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        with self._lock:
            self.close_without_flush()
            shutil.rmtree(self.directory, ignore_errors=True)
