"""Kafka's sparse segment indexes: `.index` (offset → position) and `.timeindex`.

On disk, byte for byte what Kafka writes (its DumpLogSegments reads ours):
    .index      8-byte entries: relative offset i32 · file position i32
    .timeindex 12-byte entries: timestamp i64 · relative offset i32
big-endian, offsets relative to the segment's base offset. An offset entry maps the
last offset of a batch to the position where that batch starts; a time entry (T, O)
says that no record before offset O has a timestamp above T.

Kafka preallocates the files and mmaps them. We keep the entries in two in-memory
arrays (loaded lazily, on the first lookup) and append each new entry to the file with
one write, so the file always holds exactly the valid entries — no trimming at roll,
and a crash leaves at worst a torn last entry that the loader's sanity check catches.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import ClassVar, NamedTuple

from odradek.storage.file_handles import PooledFile, pread_file

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")
INT32_MAX = (1 << 31) - 1
NO_TIMESTAMP = -1

_OPEN_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)


class CorruptIndex(Exception):
    """An index file that cannot be trusted; the segment rebuilds it from its log."""


class IndexFull(Exception):
    """An append to an index that has no room; the log rolls before this can happen."""


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class _Index:
    entry_size: ClassVar[int]

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._max_entries = max(max_index_size // self.entry_size, 1)
        # opened on first write, closed when idle or at roll (file_handles.py)
        self._file = PooledFile(path, _OPEN_APPEND)
        self._dirty = False  # written since the last flush
        self._loaded = False
        # The file's length, hence its entry count, is read on first use, not here:
        # opening thousands of partitions stats no index file (Kafka's LazyIndex).
        self._n: int | None = None
        self._length = 0
        # recovery's entries, written by end_rebuild if they differ from the file's
        self._rebuilt: bytearray | None = None
        self._on_disk: bytes | None = None

    def _stat(self) -> int:
        try:
            self._length = os.stat(self.path).st_size
        except FileNotFoundError:
            self._length = 0
        self._n = self._length // self.entry_size
        return self._n

    @property
    def _entries(self) -> int:
        # Known without reading the file, so a roll decision never loads an index.
        return self._stat() if self._n is None else self._n

    @_entries.setter
    def _entries(self, n: int) -> None:
        self._n = n

    @property
    def _file_length(self) -> int:
        if self._n is None:
            self._stat()
        return self._length

    @_file_length.setter
    def _file_length(self, length: int) -> None:
        self._length = length

    # -------------------------------------------------------------- bookkeeping

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    def resize(self, max_index_size: int) -> None:
        """A new `segment.index.bytes`; takes effect for the next full check."""
        self._max_entries = max(max_index_size // self.entry_size, 1)

    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    def _read_file(self) -> bytes:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        if len(data) % self.entry_size:
            raise CorruptIndex(
                f"{self.path} holds {len(data)} bytes, not a multiple of {self.entry_size}"
            )
        return data

    def _write(self, data: bytes) -> None:
        if self._rebuilt is not None:
            self._rebuilt += data
            self._entries += 1
            self._file_length += len(data)
            return
        self._dirty = True
        with self._file as fd:
            written = os.write(fd, data)
            if written != len(data):
                # A short write to a regular file means the disk is full: undo it.
                os.ftruncate(fd, self._entries * self.entry_size)
                raise OSError(f"short write to {self.path}")
        self._entries += 1
        self._file_length += len(data)

    def _truncate_file(self, entries: int) -> None:
        length = entries * self.entry_size
        # Opened (and created if it went missing): Kafka's tools expect the file.
        self._dirty = True
        with self._file as fd:
            os.ftruncate(fd, length)
        self._entries = entries
        self._file_length = length

    def flush(self) -> None:
        """fsync what was written since the last flush (index files found on disk were
        synced with their segment before: below the recovery point or at a clean stop)."""
        if not self._dirty:
            return
        self._dirty = False
        with self._file as fd:
            os.fsync(fd)

    def close(self) -> None:
        """Close the file handle; the entries stay readable (and writable: the file
        reopens on the next write)."""
        self._file.release_descriptor()

    def rename(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path
        self._file.rename(path)

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def _read_entry_bytes(self, n: int) -> bytes:
        return pread_file(self.path, self.entry_size, n * self.entry_size)

    def reset(self) -> None:
        """Drop every entry (recovery rebuilds from scratch)."""
        self._truncate_file(0)
        self._clear()
        self._loaded = True

    def begin_rebuild(self) -> None:
        """Drop every entry for recovery to rebuild them in memory; `end_rebuild`
        writes the file only if they differ from it. A crash seldom damages an index,
        and truncating and rewriting one per partition (two ftruncates each) was most
        of a restart after kill -9 with thousands of partitions."""
        try:
            with open(self.path, "rb") as f:
                self._on_disk = f.read()
        except FileNotFoundError:
            self._on_disk = None  # end_rebuild creates it: Kafka's tools expect it
        self._clear()
        self._loaded = True
        self._n, self._length = 0, 0
        self._rebuilt = bytearray()

    def end_rebuild(self) -> None:
        if self._rebuilt is None:
            return
        data, self._rebuilt = bytes(self._rebuilt), None
        if data == self._on_disk:
            self._on_disk = None
            return
        self._on_disk = None
        self._dirty = True
        with self._file as fd:
            os.ftruncate(fd, 0)
            if data and os.write(fd, data) != len(data):
                os.ftruncate(fd, 0)
                self._clear()
                self._n, self._length = 0, 0
                raise OSError(f"short write to {self.path}")

    def _clear(self) -> None:
        raise NotImplementedError


class OffsetIndex(_Index):
    """Relative offset → file position, one entry per `index.interval.bytes` of log."""

    entry_size = OFFSET_ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._rel = array("i")
        self._pos = array("i")

    def _clear(self) -> None:
        self._rel = array("i")
        self._pos = array("i")

    def load(self) -> None:
        if self._loaded:
            return
        raw = array("i", self._read_file())
        if sys.byteorder == "little":
            raw.byteswap()
        rel, pos = raw[0::2], raw[1::2]
        for i in range(1, len(rel)):
            if rel[i] <= rel[i - 1] or pos[i] < pos[i - 1]:
                raise CorruptIndex(f"{self.path}: entry {i} does not increase")
        self._rel, self._pos = rel, pos
        self._entries = len(rel)
        self._loaded = True

    def sanity_check(self, log_size: int) -> None:
        """Kafka's cheap check at load: whole entries, last entry inside the segment.

        Reads two entries, not the file, so a clean start of many segments stays cheap;
        the full monotonicity check runs when the index is first loaded.
        """
        if self._file_length % self.entry_size:
            raise CorruptIndex(f"{self.path} has a partial entry")
        if self._entries == 0:
            return
        first = OffsetPosition(*OFFSET_ENTRY.unpack(self._read_entry_bytes(0)))
        last = self.last_entry()
        if last.offset < self.base_offset or last.position >= log_size:
            raise CorruptIndex(f"{self.path}: last entry {last} is outside the segment")
        if last.offset < first.offset + self.base_offset or last.position < first.position:
            raise CorruptIndex(f"{self.path}: last entry {last} is below the first")

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self._entries >= self._max_entries:
            raise IndexFull(f"{self.path} is full ({self._entries} entries)")
        self.load()
        if self._rel and rel <= self._rel[-1]:
            raise ValueError(f"offset {offset} is not above the last indexed offset")
        self._write(OFFSET_ENTRY.pack(rel, position))
        self._rel.append(rel)
        self._pos.append(position)

    def lookup(self, offset: int) -> OffsetPosition:
        """The last entry whose offset is ≤ `offset`, or (base offset, 0)."""
        self.load()
        i = bisect_right(self._rel, offset - self.base_offset) - 1
        if i < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._rel[i], self._pos[i])

    def lookup_position(self, position: int) -> OffsetPosition:
        """The last entry whose position is ≤ `position`, or (base offset, 0)."""
        self.load()
        i = bisect_right(self._pos, position) - 1
        if i < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._rel[i], self._pos[i])

    def last_entry(self) -> OffsetPosition:
        if self._loaded:
            if not self._rel:
                return OffsetPosition(self.base_offset, 0)
            return OffsetPosition(self.base_offset + self._rel[-1], self._pos[-1])
        if self._entries == 0:
            return OffsetPosition(self.base_offset, 0)
        rel, pos = OFFSET_ENTRY.unpack(self._read_entry_bytes(self._entries - 1))
        return OffsetPosition(self.base_offset + rel, pos)

    def entry(self, n: int) -> OffsetPosition:
        self.load()
        return OffsetPosition(self.base_offset + self._rel[n], self._pos[n])

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ≥ `offset`."""
        self.load()
        n = bisect_left(self._rel, offset - self.base_offset)
        if n < len(self._rel):
            del self._rel[n:]
            del self._pos[n:]
            self._truncate_file(n)


class TimeIndex(_Index):
    """Timestamp → offset, appended only when the segment's max timestamp grows."""

    entry_size = TIME_ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._ts: list[int] = []
        self._rel = array("i")
        self._last: TimestampOffset | None = None

    def _clear(self) -> None:
        self._ts = []
        self._rel = array("i")
        self._last = TimestampOffset(NO_TIMESTAMP, self.base_offset)

    def load(self) -> None:
        if self._loaded:
            return
        ts: list[int] = []
        rel = array("i")
        for t, r in TIME_ENTRY.iter_unpack(self._read_file()):
            if ts and (t <= ts[-1] or r < rel[-1]):
                raise CorruptIndex(f"{self.path}: entry {len(ts)} does not increase")
            ts.append(t)
            rel.append(r)
        self._ts, self._rel = ts, rel
        self._entries = len(ts)
        self._last = None
        self._loaded = True

    def is_full(self) -> bool:
        # Kafka keeps the last slot free for the entry written when the segment rolls.
        return self._entries >= self._max_entries - 1

    def sanity_check(self) -> None:
        if self._file_length % self.entry_size:
            raise CorruptIndex(f"{self.path} has a partial entry")
        if self._entries == 0:
            return
        first_ts, _ = TIME_ENTRY.unpack(self._read_entry_bytes(0))
        last = self.last_entry()
        if last.timestamp < first_ts or last.offset < self.base_offset:
            raise CorruptIndex(f"{self.path}: last entry {last} is below the first")

    def last_entry(self) -> TimestampOffset:
        if self._loaded:
            if not self._ts:
                return TimestampOffset(NO_TIMESTAMP, self.base_offset)
            return TimestampOffset(self._ts[-1], self.base_offset + self._rel[-1])
        if self._last is None:
            if self._entries == 0:
                self._last = TimestampOffset(NO_TIMESTAMP, self.base_offset)
            else:
                t, r = TIME_ENTRY.unpack(self._read_entry_bytes(self._entries - 1))
                self._last = TimestampOffset(t, self.base_offset + r)
        return self._last

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) if the timestamp is above the last entry's.

        `skip_full_check` is for the final entry written when the segment rolls or
        closes, for which `is_full` keeps a slot.
        """
        if not skip_full_check and self.is_full():
            raise IndexFull(f"{self.path} is full ({self._entries} entries)")
        last = self.last_entry()
        if self._entries and offset < last.offset:
            raise ValueError(f"offset {offset} is below the last time-indexed {last.offset}")
        if timestamp <= last.timestamp:
            return
        self.load()
        self._write(TIME_ENTRY.pack(timestamp, offset - self.base_offset))
        self._ts.append(timestamp)
        self._rel.append(offset - self.base_offset)

    def lookup(self, timestamp: int) -> TimestampOffset:
        """The last entry whose timestamp is ≤ `timestamp`, or (-1, base offset)."""
        self.load()
        i = bisect_right(self._ts, timestamp) - 1
        if i < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._ts[i], self.base_offset + self._rel[i])

    def entry(self, n: int) -> TimestampOffset:
        self.load()
        return TimestampOffset(self._ts[n], self.base_offset + self._rel[n])

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ≥ `offset`."""
        self.load()
        n = bisect_left(self._rel, offset - self.base_offset)
        if n < len(self._rel):
            del self._ts[n:]
            del self._rel[n:]
            self._truncate_file(n)


def parse_offset_index(data: bytes, base_offset: int) -> list[OffsetPosition]:
    """Every entry of an `.index` file's bytes, as absolute offsets (for tools and tests)."""
    return [OffsetPosition(base_offset + r, p) for r, p in OFFSET_ENTRY.iter_unpack(data)]


def parse_time_index(data: bytes, base_offset: int) -> list[TimestampOffset]:
    """Every entry of a `.timeindex` file's bytes, as absolute offsets."""
    return [TimestampOffset(t, base_offset + r) for t, r in TIME_ENTRY.iter_unpack(data)]
