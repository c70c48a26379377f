"""TransactionIndex: each segment's `.txnindex`, the aborted transactions it ends.

Kafka's format, one 34-byte entry per aborted transaction, in the segment holding its
ABORT marker:
    version i16 (0) · producer id i64 · first offset i64 · last offset i64 (the
    marker's) · last stable offset i64 (the LSO once this transaction completed)
A read_committed fetch asks which aborted transactions overlap the offsets it returns,
so the consumer can drop their records; the last stable offset lets the search stop
early (Kafka's `isComplete`).

The entries are few (aborts only) and read often, so each segment's are read once and
kept, keyed by the segment object: a segment that leaves the log (retention, the
cleaner's swap) takes its entries with it. Appends go straight to the file with
`os.write` — like the log itself, nothing acknowledged waits in a Python buffer.
"""

from __future__ import annotations

import logging
import os
import struct
import weakref
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from odradek.storage.segment import TXN_INDEX_SUFFIX, LogSegment, segment_file

log = logging.getLogger(__name__)

ENTRY = struct.Struct(">hqqqq")
VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxnEntry:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def _last_offset(entry: AbortedTxnEntry) -> int:
    return entry.last_offset


def txn_index_path(segment: LogSegment) -> Path:
    return segment_file(segment.directory, segment.base_offset, TXN_INDEX_SUFFIX, segment.suffix)


def read_entries(path: Path) -> list[AbortedTxnEntry]:
    """Every whole entry of a `.txnindex` (a torn last entry is ignored)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    usable = len(data) - len(data) % ENTRY.size
    out = []
    for version, pid, first, last, lso in ENTRY.iter_unpack(memoryview(data)[:usable]):
        if version != VERSION:
            log.warning("%s: entry of unknown version %d; ignoring the rest", path, version)
            break
        out.append(AbortedTxnEntry(pid, first, last, lso))
    return out


def encode(entries: Iterable[AbortedTxnEntry]) -> bytes:
    return b"".join(ENTRY.pack(VERSION, e.producer_id, e.first_offset, e.last_offset,
                               e.last_stable_offset) for e in entries)


def _write(path: Path, data: bytes, flags: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    finally:
        os.close(fd)


def write_index(segment: LogSegment, entries: Sequence[AbortedTxnEntry]) -> None:
    """Replace a segment's `.txnindex` with `entries` (no file when there are none)."""
    path = txn_index_path(segment)
    if entries:
        _write(path, encode(entries), os.O_TRUNC)
    else:
        path.unlink(missing_ok=True)


class TxnIndexes:
    """The `.txnindex` entries of one log's segments, read lazily and cached."""

    def __init__(self) -> None:
        self._cache: weakref.WeakKeyDictionary[LogSegment, list[AbortedTxnEntry]] = (
            weakref.WeakKeyDictionary())

    def entries(self, segment: LogSegment) -> list[AbortedTxnEntry]:
        found = self._cache.get(segment)
        if found is None:
            found = self._cache[segment] = read_entries(txn_index_path(segment))
        return found

    def append(self, segment: LogSegment, entry: AbortedTxnEntry) -> None:
        entries = self.entries(segment)
        if entries and entry.last_offset < entries[-1].last_offset:
            raise ValueError(f"{entry} is below the last entry {entries[-1]}")
        _write(txn_index_path(segment), encode([entry]), os.O_APPEND)
        entries.append(entry)

    def rewrite(self, segment: LogSegment, entries: Sequence[AbortedTxnEntry]) -> None:
        """Replace the segment's index."""
        write_index(segment, entries)
        self._cache[segment] = list(entries)

    def truncate_to(self, segment: LogSegment, offset: int) -> None:
        """Forget the aborted transactions whose marker is at or above `offset`."""
        entries = self.entries(segment)
        kept = [e for e in entries if e.last_offset < offset]
        if len(kept) != len(entries):
            self.rewrite(segment, kept)

    def collect(self, segments: Sequence[LogSegment], start: int,
                upper_bound: Callable[[], int | None]) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions that overlap
        [start, upper): ended at or after `start` and began before `upper`.

        `segments` are the log's from the one holding `start` on. Stops at the first
        entry whose last stable offset reaches `upper`: every transaction that could
        touch the range had completed by then (Kafka's collectAbortedTransactions).
        `upper_bound()` is asked only once an entry could matter: a log without
        aborts costs a fetch no look at its records.
        """
        out: list[tuple[int, int]] = []
        upper: int | None = None
        for seg in segments:
            entries = self.entries(seg)
            # entries are in marker order: skip those that ended before `start`
            skip = bisect_left(entries, start, key=_last_offset)
            for e in entries[skip:]:
                if upper is None:
                    upper = upper_bound()
                    if upper is None:
                        return out
                if e.first_offset < upper:
                    out.append((e.producer_id, e.first_offset))
                if e.last_stable_offset >= upper:
                    return out
        return out
