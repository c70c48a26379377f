"""The log cleaner's work on one log: compaction, as Kafka's `Cleaner` does it.

One cleaning of a log, in Kafka's order:
1. The dirty section is [first dirty offset, first uncleanable offset): from the
   `cleaner-offset-checkpoint` (or the log start) up to the first of the active
   segment, the last stable offset and the `min.compaction.lag.ms` bound, rounded down
   to a segment (chosen by cleaner_manager.py).
2. The offset map: for every key in the dirty section, the offset of its last record
   (aborted transactions skipped), until the map's budget
   (`log.cleaner.dedupe.buffer.size`) is used; the cleaning then ends where the map did.
3. Every segment below that end — clean section and dirty — is rewritten, in groups
   of segments that together fit one segment (`segment.bytes`, index sizes, relative
   offsets), each group into one `.cleaned` segment that is flushed and then swapped in
   for the group on the log's owner thread (`Log.replace_segments`).

A record is kept when it is the last of its key (or beyond what the map covers); a
tombstone (null value) is kept until its batch's delete horizon — the first cleaning
that keeps it stamps the batch with `now + delete.retention.ms` (KIP-534, the v2 delete
horizon in the base timestamp field). Aborted transactions' batches go; markers go
once their transaction's batches are gone and their own horizon passed. Each
producer's last batch is kept, emptied of records if need be, so an idempotent
producer's sequence survives a restart; so is the round's last batch, so the log's
offsets are not lost, and each group's last batch (emptied, producer-less), so a
`.swap` file left by a crash ends exactly where its group did and the loader deletes
precisely the segments it replaces.

Batches whose records all stay are copied byte for byte; only batches that lose a
record, or gain a delete horizon, are decoded and re-encoded (same codec).
"""

from __future__ import annotations

import enum
import logging
import os
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from odradek.protocol.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    F_ATTRS,
    F_BASE_OFFSET,
    F_BASE_SEQ,
    F_BASE_TS,
    F_COUNT,
    F_EPOCH,
    F_LAST_DELTA,
    F_MAX_TS,
    F_PEPOCH,
    F_PID,
    HEADER_SIZE,
    MAX_TIMESTAMP_OFFSET,
    Compression,
    HeaderFields,
    TimestampType,
)
from odradek.protocol.record_reader import record_keys
from odradek.protocol.records import Record, decode_batch, encode_batch, encode_empty_batch
from odradek.storage.checkpoints import TopicPartition
from odradek.storage.cleaner_records import group_segments_by_size, read_batches
from odradek.storage.cleaner_txn import (
    AbortedTxn,
    CleanedTransactionMetadata,
    collect_aborted_transactions,
    marker_of,
)
from odradek.storage.index import CorruptIndex
from odradek.storage.log import Log
from odradek.storage.offset_map import OffsetMap
from odradek.storage.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    BatchInfo,
    LogSegment,
    segment_file,
)

log = logging.getLogger(__name__)

_MAX_TS = struct.Struct(">q")

Owner = Callable[[Callable[[], bool]], bool]
"""Runs a function on the log's owner thread and returns its result."""


class CleaningAborted(Exception):
    """The log was deleted, moved, truncated or the broker is stopping: drop the work."""


class BatchRetention(enum.Enum):
    DELETE = "delete"  # drop the batch without looking at its records
    RETAIN_EMPTY = "retain-empty"  # keep the header even if no record stays
    DELETE_EMPTY = "delete-empty"  # drop the batch if no record stays


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A compacted log and the range a cleaning of it would cover."""

    topic_partition: TopicPartition
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int  # a segment base: the dirty section is whole segments
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool = False  # max.compaction.lag.ms is breached

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


@dataclass(slots=True)
class CleanerStats:
    start: float = field(default_factory=time.monotonic)
    map_done: float = 0.0
    end: float = 0.0
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    invalid_messages: int = 0
    buffer_utilization: float = 0.0
    earliest_delete_horizon: int | None = None  # the next time tombstones/markers may go

    def saw_horizon(self, horizon: int) -> None:
        if self.earliest_delete_horizon is None or horizon < self.earliest_delete_horizon:
            self.earliest_delete_horizon = horizon

    @property
    def elapsed_s(self) -> float:
        return max((self.end or time.monotonic()) - self.start, 1e-9)


@dataclass(frozen=True, slots=True)
class LastRecord:
    """A live producer's last data offset (None if its last batch was a marker) and epoch."""

    last_data_offset: int | None
    producer_epoch: int


class Throttler:
    """`log.cleaner.io.max.bytes.per.second`, shared by the cleaner threads."""

    def __init__(self, bytes_per_second: float) -> None:
        self.rate = bytes_per_second
        self._start = time.monotonic()
        self._bytes = 0.0

    def maybe_throttle(self, nbytes: int) -> None:
        if self.rate <= 0 or self.rate == float("inf"):
            return
        self._bytes += nbytes
        elapsed = time.monotonic() - self._start
        wanted = self._bytes / self.rate
        if wanted > elapsed:
            time.sleep(wanted - elapsed)
        if elapsed > 1.0:  # a fresh window, so a pause long ago does not buy a burst
            self._start, self._bytes = time.monotonic(), 0.0


class _Output:
    """Retained batches on their way into the `.cleaned` segment, a buffer at a time."""

    def __init__(self, segment: LogSegment, flush_at: int) -> None:
        self.segment = segment
        self.flush_at = flush_at
        self.buf = bytearray()
        self.infos: list[BatchInfo] = []
        self.max_ts = -1
        self.written = 0

    def add(self, data: bytes | memoryview, last_offset: int, max_ts: int) -> None:
        self.buf += data
        self.infos.append(BatchInfo(len(data), last_offset, max_ts))
        self.max_ts = max(self.max_ts, max_ts)
        if len(self.buf) >= self.flush_at:
            self.flush()

    def flush(self) -> None:
        if self.infos:
            self.segment.append(self.buf, self.infos, self.max_ts)
            self.written += len(self.buf)
            self.buf = bytearray()
            self.infos = []
            self.max_ts = -1


class Cleaner:
    """One cleaner thread's tools: its offset map, buffers and the cleaning itself."""

    def __init__(
        self,
        cleaner_id: int,
        offset_map: OffsetMap,
        *,
        owner: Owner,
        check_done: Callable[[TopicPartition], None],
        io_buffer_size: int = 512 * 1024,
        clock: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        throttler: Throttler | None = None,
    ) -> None:
        self.id = cleaner_id
        self.offset_map = offset_map
        self.owner = owner
        self.check_done = check_done
        self.io_buffer_size = max(io_buffer_size, HEADER_SIZE)
        self.clock = clock
        self.throttler = throttler or Throttler(float("inf"))

    # -------------------------------------------------------------- a cleaning

    def clean(self, ltc: LogToClean) -> tuple[int, CleanerStats]:
        """Clean the log; returns the first offset not cleaned (the next checkpoint)."""
        lg = ltc.log
        tp = ltc.topic_partition
        now = self.clock()
        stats = CleanerStats()
        with lg.lock:
            segments = list(lg.segments)
            truncations = lg.truncations
            last_records = {
                pid: LastRecord(e.last_data_offset if e.batches else None, e.producer_epoch)
                for pid, e in lg.producer_state.producers.items()
            }
        upper = ltc.first_uncleanable_offset
        start = ltc.first_dirty_offset
        aborted = collect_aborted_transactions(segments, segments[0].base_offset, upper)
        self._build_offset_map(tp, segments, start, upper, aborted, stats)
        m = self.offset_map
        end_offset = m.latest_offset + 1
        if end_offset <= start:
            # Nothing dirty (a cleaning for expired delete horizons): rewrite the clean part.
            end_offset = start
            m.latest_offset = start - 1
        stats.map_done = time.monotonic()
        config = lg.config
        # Whole segments below the uncleanable offset (a segment base), never the active one.
        below = [
            seg for i, seg in enumerate(segments[:-1])
            if seg.base_offset < end_offset and segments[i + 1].base_offset <= upper
        ]  # fmt: skip
        groups = group_segments_by_size(
            below, config.segment_bytes, config.segment_index_bytes, upper
        )
        txn = CleanedTransactionMetadata(aborted)
        for group in groups:
            self._clean_group(ltc, group, txn, last_records, now, upper, truncations, stats)
        stats.buffer_utilization = m.utilization
        stats.end = time.monotonic()
        return end_offset, stats

    # -------------------------------------------------------------- the offset map

    def _build_offset_map(
        self,
        tp: TopicPartition,
        segments: Sequence[LogSegment],
        start: int,
        end: int,
        aborted: list[AbortedTxn],
        stats: CleanerStats,
    ) -> None:
        m = self.offset_map
        m.clear()
        dirty = [
            (seg, segments[i + 1].base_offset if i + 1 < len(segments) else end)
            for i, seg in enumerate(segments)
            if seg.base_offset < end
            and (i + 1 == len(segments) or segments[i + 1].base_offset > start)
        ]
        if dirty:
            dirty[-1] = (dirty[-1][0], end)
        txn = CleanedTransactionMetadata([t for t in aborted if t.last_offset >= start])
        for seg, next_start in dirty:
            self.check_done(tp)
            if self._map_segment(tp, seg, start, min(next_start, end), txn, stats):
                return

    def _map_segment(
        self,
        tp: TopicPartition,
        seg: LogSegment,
        start: int,
        next_start: int,
        txn: CleanedTransactionMetadata,
        stats: CleanerStats,
    ) -> bool:
        """Map the keys of one segment; True when the map filled up."""
        m = self.offset_map
        position = 0
        if start > seg.base_offset:
            try:
                position = seg.offset_index.lookup(start).position
            except CorruptIndex:
                position = 0  # a scan from the start finds the same batches
        for _pos, view, h in read_batches(seg, position, self.io_buffer_size):
            if m.full:
                return True
            last = h[F_BASE_OFFSET] + h[F_LAST_DELTA]
            if h[F_BASE_OFFSET] >= next_start:
                break
            attrs = h[F_ATTRS]
            pid = h[F_PID]
            if attrs & ATTR_CONTROL:
                marker = None
                if h[F_COUNT]:
                    rec = decode_batch(view, verify_crc=False).records[0]
                    marker = marker_of(rec.key, rec.value)
                txn.on_control_batch_read(pid, last, marker, h[F_COUNT] == 0)
                stats.map_messages_read += 1
            elif txn.on_batch_read(pid, last, bool(attrs & ATTR_TRANSACTIONAL)):
                stats.map_messages_read += h[F_COUNT]
            elif h[F_COUNT]:
                m.put_all(record_keys(view, h[F_BASE_OFFSET], attrs, h[F_COUNT]), start)
                stats.map_messages_read += h[F_COUNT]
            if last >= start:
                m.update_latest_offset(last)
            stats.map_bytes_read += len(view)
            self.throttler.maybe_throttle(len(view))
        m.update_latest_offset(next_start - 1)  # over a gap left by earlier cleanings
        return False

    # -------------------------------------------------------------- rewriting

    def _clean_group(
        self,
        ltc: LogToClean,
        group: list[LogSegment],
        txn: CleanedTransactionMetadata,
        last_records: dict[int, LastRecord],
        now: int,
        upper: int,
        truncations: int,
        stats: CleanerStats,
    ) -> None:
        lg, tp = ltc.log, ltc.topic_partition
        base = group[0].base_offset
        for kind in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            segment_file(lg.directory, base, kind, CLEANED_SUFFIX).unlink(missing_ok=True)
        cleaned = LogSegment(lg.directory, base, lg.config, now, create=True,
                             suffix=CLEANED_SUFFIX)
        try:
            out = _Output(cleaned, self.io_buffer_size)
            dropped_last: HeaderFields | None = None
            for seg in group:
                for _pos, view, h in read_batches(seg, 0, self.io_buffer_size):
                    self.check_done(tp)
                    kept = self._filter_batch(view, h, txn, last_records, now, upper,
                                              lg.config.delete_retention_ms, stats)
                    stats.bytes_read += len(view)
                    self.throttler.maybe_throttle(len(view))
                    last = h[F_BASE_OFFSET] + h[F_LAST_DELTA]
                    if kept is None:
                        dropped_last = h
                        continue
                    dropped_last = None
                    max_ts = _MAX_TS.unpack_from(kept, MAX_TIMESTAMP_OFFSET)[0]
                    out.add(kept, last, max_ts)
            if dropped_last is not None:
                # The group's end stays visible (see the module docstring).
                h = dropped_last
                out.add(_empty_like(h, with_producer=False),
                        h[F_BASE_OFFSET] + h[F_LAST_DELTA], h[F_MAX_TS])
            out.flush()
            stats.bytes_written += out.written
            cleaned.on_become_inactive()
            cleaned.flush()
            try:
                mtime = os.stat(group[-1].log_path).st_mtime
                os.utime(cleaned.log_path, (mtime, mtime))
            except OSError:
                pass
            swapped = self.owner(
                lambda: self._swap(tp, lg, cleaned, group, truncations)
            )
        except BaseException:
            cleaned.delete()
            raise
        if not swapped:
            cleaned.delete()
            raise CleaningAborted(f"{tp[0]}-{tp[1]} changed while it was being cleaned")
        log.debug("cleaned %s into %s", group, cleaned)

    def _swap(
        self, tp: TopicPartition, lg: Log, cleaned: LogSegment, group: list[LogSegment],
        truncations: int,
    ) -> bool:
        try:
            self.check_done(tp)  # on the owner thread: an abort cannot slip in after this
        except CleaningAborted:
            return False
        return lg.replace_segments(cleaned, group, truncations)

    def _filter_batch(
        self,
        view: memoryview,
        h: HeaderFields,
        txn: CleanedTransactionMetadata,
        last_records: dict[int, LastRecord],
        now: int,
        upper: int,
        delete_retention_ms: int,
        stats: CleanerStats,
    ) -> bytes | memoryview | None:
        """What of one batch stays: the batch as it is, a rewrite, an empty header, or
        None. Kafka's checkBatchRetention, shouldRetainRecord and filterTo in one."""
        attrs = h[F_ATTRS]
        pid = h[F_PID]
        count = h[F_COUNT]
        last = h[F_BASE_OFFSET] + h[F_LAST_DELTA]
        control = bool(attrs & ATTR_CONTROL)
        horizon = h[F_BASE_TS] if attrs & ATTR_DELETE_HORIZON else None
        records: list[Record] | None = None
        if control:
            marker = None
            if count:
                records = decode_batch(view, verify_crc=False).records
                marker = marker_of(records[0].key, records[0].value)
            can_discard = txn.on_control_batch_read(pid, last, marker, count == 0)
            discard_records = can_discard and horizon is not None and horizon <= now
        else:
            can_discard = txn.on_batch_read(pid, last, bool(attrs & ATTR_TRANSACTIONAL))
            discard_records = can_discard
        if pid >= 0 and _is_last_of_producer(h, last, control, last_records):
            retention = BatchRetention.RETAIN_EMPTY  # keeps the producer's sequence
        elif last + 1 == upper:
            retention = BatchRetention.RETAIN_EMPTY  # keeps the round's last offset
        elif discard_records:
            retention = BatchRetention.DELETE
        else:
            retention = BatchRetention.DELETE_EMPTY
        stats.messages_read += count
        if retention is BatchRetention.DELETE:
            return None
        marker_for_empty_txn = can_discard and control
        retained: list[Record] = []
        all_kept = False
        tombstones = False
        if discard_records or not count:
            all_kept = not count
        elif control:
            assert records is not None
            retained, all_kept = records, True
        else:
            # Decide on keys alone; decode the batch only if it must be rewritten.
            keys = record_keys(view, h[F_BASE_OFFSET], attrs, count)
            keep = self._retain(keys, horizon, now, stats)
            kept = keep.count(True)
            tombstones = any(not v for (_, _, v), k in zip(keys, keep, strict=True) if k)
            all_kept = kept == count
            if all_kept and (horizon is not None or not tombstones):
                stats.messages_written += count
                if horizon is not None and horizon > now and tombstones:
                    stats.saw_horizon(horizon)
                return view
            if kept:
                records = decode_batch(view, verify_crc=False).records
                retained = [r for r, k in zip(records, keep, strict=True) if k]
        if retained:
            stats.messages_written += len(retained)
            tombstones = tombstones or any(r.value is None for r in retained)
            set_horizon = (tombstones or marker_for_empty_txn) and horizon is None
            if set_horizon:
                horizon = now + delete_retention_ms
            if horizon is not None and horizon > now and (tombstones or control):
                stats.saw_horizon(horizon)
            if all_kept and not set_horizon:
                return view
            log_append_time = bool(attrs & ATTR_TIMESTAMP_TYPE)
            return encode_batch(
                retained,
                base_offset=h[F_BASE_OFFSET],
                compression=Compression(attrs & ATTR_COMPRESSION_MASK),
                timestamp_type=(TimestampType.LOG_APPEND_TIME if log_append_time
                                else TimestampType.CREATE_TIME),
                producer_id=pid,
                producer_epoch=h[F_PEPOCH],
                base_sequence=h[F_BASE_SEQ],
                transactional=bool(attrs & ATTR_TRANSACTIONAL),
                control=control,
                partition_leader_epoch=h[F_EPOCH],
                log_append_time=h[F_MAX_TS] if log_append_time else None,
                last_offset_delta=h[F_LAST_DELTA],
                delete_horizon_ms=horizon,
            )
        if retention is BatchRetention.RETAIN_EMPTY:
            return _empty_like(h, with_producer=True)
        return None

    def _retain(
        self, keys: list[tuple[int, bytes | None, bool]], horizon: int | None, now: int,
        stats: CleanerStats,
    ) -> list[bool]:
        """Kafka's shouldRetainRecord for each record of a batch. A record stays when
        it lies beyond what the map knows (a later cleaning decides), or it is the last
        of its key and has a value, or it is a tombstone before its batch's horizon.
        Keyless records go (compacted topics refuse them; old data may hold some)."""
        m = self.offset_map
        latest = m.latest_offset
        get = m.get
        tombstones_stay = horizon is None or now < horizon
        keep = [
            o > latest or (k is not None and o >= get(k) and (v or tombstones_stay))
            for o, k, v in keys
        ]
        stats.invalid_messages += sum(1 for o, k, _ in keys if k is None and o <= latest)
        return keep


def _is_last_of_producer(
    h: HeaderFields, last: int, control: bool, last_records: dict[int, LastRecord]
) -> bool:
    """Kafka's isBatchLastRecordOfProducer: the batch holding a live producer's last
    sequence, or its last marker when its last write was one (it carries the epoch)."""
    record = last_records.get(h[F_PID])
    if record is None:
        return False
    if record.last_data_offset is not None:
        return last == record.last_data_offset
    return control and h[F_PEPOCH] == record.producer_epoch


def _empty_like(h: HeaderFields, *, with_producer: bool) -> bytes:
    attrs = h[F_ATTRS]
    ts_type = (TimestampType.LOG_APPEND_TIME if attrs & ATTR_TIMESTAMP_TYPE
               else TimestampType.CREATE_TIME)
    if not with_producer:
        return encode_empty_batch(
            base_offset=h[F_BASE_OFFSET], last_offset_delta=h[F_LAST_DELTA],
            max_timestamp=h[F_MAX_TS], timestamp_type=ts_type,
            partition_leader_epoch=h[F_EPOCH],
        )  # fmt: skip
    return encode_empty_batch(
        base_offset=h[F_BASE_OFFSET],
        last_offset_delta=h[F_LAST_DELTA],
        max_timestamp=h[F_MAX_TS],
        timestamp_type=ts_type,
        producer_id=h[F_PID],
        producer_epoch=h[F_PEPOCH],
        base_sequence=h[F_BASE_SEQ],
        transactional=bool(attrs & ATTR_TRANSACTIONAL),
        control=bool(attrs & ATTR_CONTROL),
        partition_leader_epoch=h[F_EPOCH],
    )
