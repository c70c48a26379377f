"""One log segment: a `.log` file of record batches and its two sparse indexes.

Files are named by the segment's base offset, 20 digits zero padded, as Kafka names
them: `00000000000000001234.log`, `.index`, `.timeindex`. A suffix (`.deleted`,
`.cleaned`, `.swap`) marks a segment on its way out or in.

Appends go straight to the file descriptor with `os.write`: no Python-level buffer
sits between an acknowledged append and the page cache, so a SIGKILL loses nothing
that was acknowledged. Reads are `os.pread` of whole batches, or for a Fetch a slice of
the file (file_records.py) that the server sends with sendfile. The only per-batch work
is reading 61-byte headers; records are decoded only to answer a timestamp query.
"""

from __future__ import annotations

import logging
import os
import random
import struct
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from odradek.protocol.batch import (
    F_BASE_OFFSET,
    F_LAST_DELTA,
    F_LENGTH,
    F_MAGIC,
    F_MAX_TS,
    HEADER,
    HEADER_SIZE,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    PREFIX,
    HeaderFields,
)
from odradek.protocol.errors import CorruptMessage
from odradek.storage.file_handles import PooledFile
from odradek.storage.file_records import FileRecords
from odradek.storage.index import (
    INT32_MAX,
    NO_TIMESTAMP,
    CorruptIndex,
    OffsetIndex,
    TimeIndex,
)
from odradek.storage.log_config import LogConfig
from odradek.storage.segment_recovery import check_segment, recover_segment

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

_LENGTH = struct.Struct(">i")

# HeaderFields scans read this much at a time: one read covers an index interval of
# small batches, and a big batch costs one read for its header.
_SCAN_CHUNK = 16 * 1024


Buffer = bytes | bytearray | memoryview


def filename_prefix(offset: int) -> str:
    return f"{offset:020d}"


def segment_file(directory: Path, base_offset: int, kind: str, suffix: str = "") -> Path:
    return directory / f"{filename_prefix(base_offset)}{kind}{suffix}"


def _fdatasync(fd: int) -> None:
    # fdatasync also persists a size change, which is all the metadata a log needs.
    sync = getattr(os, "fdatasync", os.fsync)
    sync(fd)


class BatchInfo(NamedTuple):
    """What a segment needs of each appended batch, its offsets already assigned."""

    size: int
    last_offset: int
    max_timestamp: int


class LogOffsetPosition(NamedTuple):
    """A batch found by offset: its offsets, where it starts and how big it is."""

    base_offset: int
    last_offset: int
    position: int
    size: int


class FetchData(NamedTuple):
    position: int  # of the first batch returned, in this segment
    first_offset: int  # base offset of the first batch returned
    records: bytes | FileRecords


class OffsetAndTimestamp(NamedTuple):
    """A record found by timestamp, as ListOffsets reports it."""

    offset: int
    timestamp: int
    leader_epoch: int  # -1 when the batch carries none


class LogSegment:
    """A `.log` file and its indexes. Not thread safe: the owning Log serialises use."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        now_ms: int,
        *,
        create: bool = False,
        suffix: str = "",
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.suffix = suffix
        self.index_interval_bytes = config.index_interval_bytes
        self.created_ms = now_ms
        jitter = config.segment_jitter_ms
        # Each segment draws its own jitter, as in Kafka, so rolls spread out.
        self.roll_jitter_ms = random.randrange(min(jitter, config.segment_ms)) if jitter else 0
        self.log_path = segment_file(directory, base_offset, LOG_SUFFIX, suffix)
        # opened on first use and closed when idle (file_handles.py): thousands of
        # partitions must not need thousands of descriptors
        self._file = PooledFile(self.log_path, os.O_RDWR | os.O_APPEND, create=create)
        self.size = os.stat(self.log_path).st_size
        # Whether the file may hold bytes not yet fsynced: unknown for a file found on
        # disk until the loader says otherwise (mark_flushed); a clean stop then syncs
        # only what changed, not every partition it holds.
        self._unflushed = not create
        index_size = config.segment_index_bytes
        self._offset_index = OffsetIndex(
            segment_file(directory, base_offset, INDEX_SUFFIX, suffix), base_offset, index_size
        )
        self._time_index = TimeIndex(
            segment_file(directory, base_offset, TIME_INDEX_SUFFIX, suffix), base_offset, index_size
        )
        # False: the loader trusted the indexes without looking at them (a segment
        # below the recovery point or after a clean stop); the first use checks them
        self._indexes_checked = True
        if create:
            # Kafka's tools expect both index files next to every log file.
            for index_path in (self._offset_index.path, self._time_index.path):
                os.close(os.open(index_path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
        self._bytes_since_index = 0
        self._max_ts: int | None = None  # None: not known yet, read lazily
        self._max_ts_offset = -1
        self._rolling_ts: int | None = None
        self._next_offset: int | None = base_offset if create else None
        self.closed = False
        self.bytes_scanned = 0  # header bytes read to find offsets; tests assert on it

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"

    # -------------------------------------------------------------- indexes

    @property
    def offset_index(self) -> OffsetIndex:
        if not self._indexes_checked:
            self._check_indexes()
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if not self._indexes_checked:
            self._check_indexes()
        return self._time_index

    def defer_index_check(self) -> None:
        """The loader trusts the index files unread, as Kafka's LazyIndex does: they
        are sanity checked (and rebuilt if they fail) on first use, so a restart of
        thousands of partitions reads none of the segments nobody asks for."""
        self._indexes_checked = False

    def _check_indexes(self) -> None:
        self._indexes_checked = True
        try:
            check_segment(self)
        except (CorruptIndex, CorruptMessage, ValueError, struct.error) as exc:
            log.warning("%s; rebuilding the indexes of %s", exc, self.log_path)
            self.recover()

    def close_index_handles(self) -> None:
        """Close the index files (the entries stay), without checking unread ones."""
        self._offset_index.close()
        self._time_index.close()

    # -------------------------------------------------------------- header scans

    def _headers(self, start: int, end: int) -> Iterator[tuple[int, HeaderFields]]:
        """(position, header fields) of every complete batch in [start, end)."""
        pos = start
        buf = b""
        buf_start = start
        while end - pos >= HEADER_SIZE:
            off = pos - buf_start
            if off + HEADER_SIZE > len(buf):
                buf = self._pread(min(_SCAN_CHUNK, end - pos), pos)
                self.bytes_scanned += len(buf)
                buf_start, off = pos, 0
                if len(buf) < HEADER_SIZE:
                    return
            h: HeaderFields = HEADER.unpack_from(buf, off)
            if h[F_MAGIC] != MAGIC_V2 or h[F_LENGTH] < MIN_BATCH_LENGTH:
                raise CorruptMessage(f"{self.log_path}: no valid batch header at {pos}")
            size = h[F_LENGTH] + LOG_OVERHEAD
            if pos + size > end:
                return
            yield pos, h
            pos += size

    def batches_from(self, position: int = 0) -> Iterator[tuple[int, HeaderFields]]:
        return self._headers(position, self.size)

    def _pread(self, size: int, position: int) -> bytes:
        with self._file as fd:
            return os.pread(fd, size, position)

    def read_batch(self, position: int, size: int) -> bytes:
        return self._pread(size, position)

    # -------------------------------------------------------------- offsets

    def position_for(self, offset: int) -> int:
        """Where to start scanning for `offset`: its index entry's position."""
        try:
            return self.offset_index.lookup(offset).position
        except CorruptIndex as exc:
            log.warning("%s; rebuilding the indexes of %s", exc, self.log_path)
            self.recover()
            return self.offset_index.lookup(offset).position

    def translate_offset(self, offset: int, start_position: int = 0) -> LogOffsetPosition | None:
        """The first batch whose last offset is ≥ `offset`: index lookup, then a short scan."""
        # The hottest loop of a fetch, so written out flat rather than over _headers.
        pos = max(self.position_for(offset), start_position)
        end = self.size
        unpack = PREFIX.unpack_from
        while end - pos >= HEADER_SIZE:
            buf = self._pread(min(_SCAN_CHUNK, end - pos), pos)
            self.bytes_scanned += len(buf)
            n, off = len(buf), 0
            while n - off >= PREFIX.size:
                base, length, _, magic, _, _, delta = unpack(buf, off)
                if magic != MAGIC_V2 or length < MIN_BATCH_LENGTH:
                    raise CorruptMessage(f"{self.log_path}: no valid batch header at {pos + off}")
                size = length + LOG_OVERHEAD
                if pos + off + size > end:
                    return None
                if base + delta >= offset:
                    return LogOffsetPosition(base, base + delta, pos + off, size)
                off += size
            pos += off
        return None

    def _boundary_below(self, start: int, limit: int) -> int:
        """The last batch end in [start, limit]: from the index entry nearest below.

        Called after translate_offset, which loaded (or rebuilt) the index.
        """
        pos = max(start, self.offset_index.lookup_position(limit).position)
        unpack = _LENGTH.unpack_from
        while limit - pos >= HEADER_SIZE:
            buf = self._pread(min(_SCAN_CHUNK, limit - pos), pos)
            self.bytes_scanned += len(buf)
            n, off = len(buf), 0
            while n - off >= LOG_OVERHEAD:
                size = unpack(buf, off + LENGTH_OFFSET)[0] + LOG_OVERHEAD
                if size < HEADER_SIZE:
                    raise CorruptMessage(f"{self.log_path}: no valid batch header at {pos + off}")
                if pos + off + size > limit:
                    return pos + off
                off += size
            pos += off
        return pos

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_batch: bool = True,
        file_records: bool = False,
    ) -> FetchData | None:
        """Whole batches from the one holding `start_offset`, at most `max_size` bytes
        (but the first batch whole when `min_one_batch`), never past `max_position`:
        read, or with `file_records` left in the file as a slice to send from it.

        None when no batch of this segment reaches `start_offset`.
        """
        limit = self.size if max_position is None else min(max_position, self.size)
        first = self.translate_offset(start_offset)
        if first is None:
            return None
        if first.position >= limit:
            return FetchData(first.position, first.base_offset, b"")
        budget = max(max_size, first.size) if min_one_batch else max_size
        if budget < first.size:
            return FetchData(first.position, first.base_offset, b"")
        end = first.position + budget
        end = limit if end >= limit else self._boundary_below(first.position, end)
        if file_records:
            start = first.position
            return FetchData(start, first.base_offset, FileRecords(
                self._file, start, end - start, lambda: self._next_offset_within(start, end)))
        data = self.read_batch(first.position, end - first.position)
        return FetchData(first.position, first.base_offset, data)

    def _next_offset_within(self, start: int, end: int) -> int | None:
        """The offset after the last batch in [start, end), a slice's batch ends: a
        scan from the index entry nearest below `end`."""
        pos = max(start, self.offset_index.lookup_position(end - 1).position)
        found = None
        for _, h in self._headers(pos, end):
            found = h[F_BASE_OFFSET] + h[F_LAST_DELTA] + 1
        return found

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    @property
    def next_offset(self) -> int:
        """The offset after this segment's last batch (its base offset when empty)."""
        if self._next_offset is None:
            self._next_offset, _ = self.scan_tail()
        return self._next_offset

    def scan_tail(self) -> tuple[int, int]:
        """(next offset, end of the last complete batch), scanning from the last index entry.

        An end short of `size` means a torn tail.
        """
        start = self.offset_index.last_entry().position
        if start >= self.size:
            start = 0
        next_offset, end = self.base_offset, start
        for pos, h in self._headers(start, self.size):
            next_offset = h[F_BASE_OFFSET] + h[F_LAST_DELTA] + 1
            end = pos + h[F_LENGTH] + LOG_OVERHEAD
        if end == self.size:
            self._next_offset = next_offset  # the loader's check scanned it: once
        return next_offset, end

    # -------------------------------------------------------------- timestamps

    def _load_max_timestamp(self) -> None:
        if self._max_ts is None:
            last = self.time_index.last_entry()  # one entry read; the file stays unloaded
            self._max_ts, self._max_ts_offset = last.timestamp, last.offset

    @property
    def max_timestamp(self) -> int:
        """The largest batch max timestamp in the segment (-1 when none)."""
        self._load_max_timestamp()
        assert self._max_ts is not None
        return self._max_ts

    @property
    def offset_of_max_timestamp(self) -> int:
        """Last offset of the batch holding the max timestamp (Kafka's 'shallow' offset)."""
        self._load_max_timestamp()
        return self._max_ts_offset

    def _read_largest_timestamp(self) -> None:
        """Kafka's readLargestTimestamp: the time index's last entry, then a scan after it."""
        last = self.time_index.last_entry()
        ts, offset = last.timestamp, last.offset
        for _, h in self._headers(self.position_for(last.offset), self.size):
            if h[F_MAX_TS] > ts:
                ts, offset = h[F_MAX_TS], h[F_BASE_OFFSET] + h[F_LAST_DELTA]
        self._max_ts, self._max_ts_offset = ts, offset

    def rolling_timestamp(self) -> int:
        """The first batch's max timestamp, which segment.ms counts from (-1 if none)."""
        if self._rolling_ts is None:
            self._rolling_ts = NO_TIMESTAMP
            if self.size >= HEADER_SIZE:
                self._rolling_ts = HEADER.unpack(self._pread(HEADER_SIZE, 0))[F_MAX_TS]
        return self._rolling_ts

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        first = self.rolling_timestamp() if self.size else NO_TIMESTAMP
        if first >= 0:
            return message_timestamp - first
        return now_ms - self.created_ms

    def should_roll(
        self,
        *,
        max_segment_bytes: int,
        max_segment_ms: int,
        messages_size: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        now_ms: int,
    ) -> bool:
        """Kafka's LogSegment.shouldRoll, condition for condition."""
        if self.size > max_segment_bytes - messages_size:
            return True
        if self.size > 0:
            waited = self.time_waited_for_roll(now_ms, max_timestamp_in_messages)
            if waited > max_segment_ms - self.roll_jitter_ms:
                return True
        return (
            self.offset_index.is_full()
            or self.time_index.is_full()
            or not self.can_convert_to_relative_offset(max_offset_in_messages)
        )

    # -------------------------------------------------------------- writing

    def append(self, data: Buffer, batches: Sequence[BatchInfo], largest_timestamp: int) -> None:
        """Write batches whose offsets are assigned, then index them.

        One write call for the whole buffer; index entries per batch, one per
        `index.interval.bytes` (an entry maps a batch's last offset to its position).
        """
        if not batches:
            return
        if not self.can_convert_to_relative_offset(batches[-1].last_offset):
            raise ValueError(f"offset {batches[-1].last_offset} does not fit {self}")
        position = self.size
        if position == 0:
            self._rolling_ts = largest_timestamp
        self._write_all(data)
        self._load_max_timestamp()
        assert self._max_ts is not None
        interval = self.index_interval_bytes
        for batch in batches:
            if batch.max_timestamp > self._max_ts:
                self._max_ts, self._max_ts_offset = batch.max_timestamp, batch.last_offset
            # A multi-batch append can find the index full; the next append rolls.
            if (
                self._bytes_since_index > interval
                and not self.offset_index.is_full()
                and not self.time_index.is_full()
            ):
                self.offset_index.append(batch.last_offset, position)
                self.time_index.maybe_append(self._max_ts, self._max_ts_offset)
                self._bytes_since_index = 0
            position += batch.size
            self._bytes_since_index += batch.size
        self.size = position
        self._next_offset = batches[-1].last_offset + 1

    def _write_all(self, data: Buffer) -> None:
        view = memoryview(data).cast("B")
        done = 0
        self._unflushed = True
        with self._file as fd:
            try:
                while done < len(view):
                    n = os.write(fd, view[done:])
                    if n <= 0:
                        raise OSError(f"write to {self.log_path} made no progress")
                    done += n
            except OSError:
                # Never leave half a batch behind an acknowledged one.
                os.ftruncate(fd, self.size)
                raise

    def flush(self) -> None:
        if self.closed:
            return
        try:
            if self._unflushed:
                self._unflushed = False  # first: an append meanwhile marks it again
                with self._file as fd:
                    _fdatasync(fd)
            self._offset_index.flush()
            self._time_index.flush()
        except OSError:
            if not self.closed:  # closed by a truncation while we were flushing
                raise

    def append_final_time_index_entry(self) -> None:
        """The segment's max timestamp as its time index's last entry, as Kafka writes
        at roll and close (retention and timestamp lookups rely on it)."""
        if self._max_ts is None:
            return  # never loaded, so unchanged since the entry was last written
        try:
            self.time_index.maybe_append(self._max_ts, self._max_ts_offset, skip_full_check=True)
        except (ValueError, OSError) as exc:
            log.warning("%s: final time index entry not written: %s", self.log_path, exc)

    def on_become_inactive(self) -> None:
        """At roll: the time index gets its final entry; index handles close."""
        self.append_final_time_index_entry()
        self.offset_index.close()
        self.time_index.close()

    def truncate_to(self, offset: int, now_ms: int) -> int:
        """Drop every batch whose last offset is ≥ `offset`; returns bytes removed."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        removed = 0
        if mapping is not None:
            removed = self.size - mapping.position
            self._unflushed = True
            with self._file as fd:
                os.ftruncate(fd, mapping.position)
            self.size = mapping.position
        if self.size == 0:
            self.created_ms = now_ms
            self._rolling_ts = None
        self._bytes_since_index = 0
        self._next_offset = None
        self._read_largest_timestamp()
        return removed

    def recover(
        self,
        on_new_epoch: Callable[[int, int], object] | None = None,
        latest_epoch: int | None = None,
    ) -> int:
        """Rebuild both indexes from the log, checking every batch; cut a bad tail.

        Returns the bytes dropped. The scan lives apart from the running segment, as
        Kafka keeps recovery apart from the running log: `segment_recovery`.
        """
        return recover_segment(self, on_new_epoch, latest_epoch)

    def file_size(self) -> int:
        with self._file as fd:
            return os.fstat(fd).st_size

    def mark_flushed(self) -> None:
        """The loader knows the file is durable (a clean shutdown, or below the
        recovery point): nothing for the next flush to sync."""
        self._unflushed = False

    def truncate_file(self, size: int) -> None:
        self._unflushed = True
        with self._file as fd:
            os.ftruncate(fd, size)
        self.size = size

    def set_recovered_state(
        self,
        *,
        size: int,
        next_offset: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
        first_timestamp: int,
        bytes_since_index: int,
    ) -> None:
        """What a recovery scan learned, so nothing is read twice."""
        self.size = size
        self._next_offset = next_offset
        self._max_ts, self._max_ts_offset = max_timestamp, offset_of_max_timestamp
        self._rolling_ts = first_timestamp
        self._bytes_since_index = bytes_since_index

    def resize_indexes(self, max_index_size: int) -> None:
        self._offset_index.resize(max_index_size)
        self._time_index.resize(max_index_size)

    # -------------------------------------------------------------- files

    def close(self) -> None:
        if self.closed:
            return
        self.append_final_time_index_entry()
        self.close_index_handles()
        self.closed = True
        self._file.close()

    def _paths(self) -> list[Path]:
        txn = segment_file(self.directory, self.base_offset, TXN_INDEX_SUFFIX, self.suffix)
        return [self.log_path, self._offset_index.path, self._time_index.path, txn]

    def close_handles(self) -> None:
        """Close the files without writing anything (a failed disk, a simulated crash)."""
        if not self.closed:
            self.close_index_handles()
            self.closed = True
            self._file.close()

    def delete(self) -> None:
        """Close and remove every file of the segment."""
        self.close_handles()
        for path in self._paths():
            path.unlink(missing_ok=True)

    def change_file_suffixes(self, old: str, new: str) -> None:
        """Rename the segment's files, e.g. '' → '.deleted' before an async delete."""
        if self.suffix != old:
            raise ValueError(f"{self} has suffix {self.suffix!r}, not {old!r}")
        txn_old = segment_file(self.directory, self.base_offset, TXN_INDEX_SUFFIX, old)
        self.log_path = self._rename(self.log_path, LOG_SUFFIX, new)
        self._file.rename(self.log_path)
        self._offset_index.rename(
            segment_file(self.directory, self.base_offset, INDEX_SUFFIX, new))
        self._time_index.rename(
            segment_file(self.directory, self.base_offset, TIME_INDEX_SUFFIX, new)
        )
        if txn_old.exists():
            txn_new = segment_file(self.directory, self.base_offset, TXN_INDEX_SUFFIX, new)
            os.replace(txn_old, txn_new)
        self.suffix = new

    def _rename(self, path: Path, kind: str, suffix: str) -> Path:
        target = segment_file(self.directory, self.base_offset, kind, suffix)
        os.replace(path, target)
        return target

    def has_suffix(self, suffix: str) -> bool:
        return self.suffix == suffix
