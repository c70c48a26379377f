"""The scans of one segment's `.log` that recovery makes, apart from the segment itself.

`recover_segment` checks every batch and rebuilds the indexes (Kafka's
LogSegment.recover), `check_segment` is the cheap check trusted after a clean
shutdown, `producer_batches` finds the batches that carry a producer id. The loader
uses all three; the running segment calls `recover_segment` when it finds a corrupt
index, and the transaction index rebuild reads `producer_batches`. They see a segment
only through `RecoverableSegment`, so this module sits below segment.py and the loader,
not between them.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from crc32c import crc32c

from odradek.protocol.batch import (
    ATTRIBUTES_OFFSET,
    F_BASE_OFFSET,
    F_CRC,
    F_EPOCH,
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
    PRODUCER_ID_OFFSET,
    HeaderFields,
)
from odradek.protocol.errors import CorruptMessage
from odradek.storage.index import INT32_MAX, NO_TIMESTAMP, CorruptIndex, OffsetIndex, TimeIndex

log = logging.getLogger(__name__)

_RECOVERY_CHUNK = 1 << 20
_LENGTH = struct.Struct(">i")
_PID = struct.Struct(">q")


class RecoverableSegment(Protocol):
    """What the scans need of a LogSegment."""

    base_offset: int
    size: int
    index_interval_bytes: int
    log_path: Path

    @property
    def offset_index(self) -> OffsetIndex: ...

    @property
    def time_index(self) -> TimeIndex: ...

    def read_batch(self, position: int, size: int) -> bytes: ...

    def file_size(self) -> int: ...

    def truncate_file(self, size: int) -> None: ...

    def set_recovered_state(self, *, size: int, next_offset: int, max_timestamp: int,
                            offset_of_max_timestamp: int, first_timestamp: int,
                            bytes_since_index: int) -> None: ...


def recover_segment(
    segment: RecoverableSegment,
    on_new_epoch: Callable[[int, int], object] | None = None,
    latest_epoch: int | None = None,
) -> int:
    """Rebuild a segment's indexes from its log, checking every batch (Kafka's
    LogSegment.recover).

    Stops at the first batch that is torn, fails its CRC, or whose offsets go
    backwards or overflow the segment; truncates the file there. Returns the number
    of bytes dropped. `on_new_epoch(epoch, base offset)` is told of each batch whose
    leader epoch is above every earlier one (and above `latest_epoch`), as Kafka
    feeds its leader epoch cache during recovery.
    """
    offset_index, time_index = segment.offset_index, segment.time_index
    # rebuilt in memory; each file is rewritten only if its entries changed
    offset_index.begin_rebuild()
    time_index.begin_rebuild()
    try:
        return _rebuild(segment, on_new_epoch, latest_epoch)
    finally:
        offset_index.end_rebuild()
        time_index.end_rebuild()


def _rebuild(
    segment: RecoverableSegment,
    on_new_epoch: Callable[[int, int], object] | None,
    latest_epoch: int | None,
) -> int:
    offset_index, time_index = segment.offset_index, segment.time_index
    file_size = segment.file_size()
    valid = 0
    last_index_entry = 0
    max_ts, max_ts_offset = NO_TIMESTAMP, -1
    next_offset = segment.base_offset
    first_ts: int | None = None
    buf = b""
    view = memoryview(buf)
    buf_start = 0
    reason = ""
    interval = segment.index_interval_bytes
    base_offset = segment.base_offset
    epoch_seen = -1 if latest_epoch is None else latest_epoch
    # Per batch: one header unpack and one CRC over a slice of a 1 MiB read; this
    # loop is what a restart after a crash costs, so it stays flat.
    while valid < file_size:
        off = valid - buf_start
        if off + HEADER_SIZE > len(buf):
            buf = segment.read_batch(valid, min(_RECOVERY_CHUNK, file_size - valid))
            view = memoryview(buf)
            buf_start, off = valid, 0
            if len(buf) < HEADER_SIZE:
                reason = "a torn batch header"
                break
        h: HeaderFields = HEADER.unpack_from(buf, off)
        size = h[F_LENGTH] + LOG_OVERHEAD
        if h[F_MAGIC] != MAGIC_V2 or h[F_LENGTH] < MIN_BATCH_LENGTH:
            reason = "an invalid batch header"
            break
        if valid + size > file_size:
            reason = "a torn batch"
            break
        if off + size > len(buf):
            buf = segment.read_batch(valid, max(size, min(_RECOVERY_CHUNK, file_size - valid)))
            view = memoryview(buf)
            buf_start, off = valid, 0
        if crc32c(view[off + ATTRIBUTES_OFFSET : off + size]) != h[F_CRC]:
            reason = "a batch failing its CRC"
            break
        base, last = h[F_BASE_OFFSET], h[F_BASE_OFFSET] + h[F_LAST_DELTA]
        if base < next_offset or h[F_LAST_DELTA] < 0 or last - base_offset > INT32_MAX:
            reason = f"offsets {base}..{last} out of order after {next_offset}"
            break
        if first_ts is None:
            first_ts = h[F_MAX_TS]
        if h[F_MAX_TS] > max_ts:
            max_ts, max_ts_offset = h[F_MAX_TS], last
        if (
            valid - last_index_entry > interval
            and not offset_index.is_full()
            and not time_index.is_full()
        ):
            offset_index.append(last, valid)
            time_index.maybe_append(max_ts, max_ts_offset)
            last_index_entry = valid
        if h[F_EPOCH] > epoch_seen:
            epoch_seen = h[F_EPOCH]
            if on_new_epoch is not None:
                on_new_epoch(epoch_seen, base)
        next_offset = last + 1
        valid += size
    truncated = file_size - valid
    if truncated:
        log.warning(
            "%s: dropping %d bytes from position %d: %s",
            segment.log_path, truncated, valid, reason or "trailing bytes",
        )
        segment.truncate_file(valid)
    segment.set_recovered_state(
        size=valid,
        next_offset=next_offset,
        max_timestamp=max_ts,
        offset_of_max_timestamp=max_ts_offset,
        first_timestamp=first_ts if first_ts is not None else NO_TIMESTAMP,
        bytes_since_index=valid - last_index_entry,
    )
    # A normally closed segment ends its time index with its max; so does this one.
    time_index.maybe_append(max_ts, max_ts_offset, skip_full_check=True)
    return truncated


def check_segment(segment: RecoverableSegment) -> None:
    """Cheap checks of index files trusted after a clean shutdown (Kafka's
    sanityCheck, plus: the last offset entry must point at the batch it names).

    Raises CorruptIndex when they must be rebuilt.
    """
    offset_index, time_index = segment.offset_index, segment.time_index
    for index_path in (offset_index.path, time_index.path):
        if not index_path.exists() and segment.size > 0:
            raise CorruptIndex(f"{index_path} is missing")
    offset_index.sanity_check(segment.size)
    time_index.sanity_check()
    if offset_index.entries:
        entry = offset_index.last_entry()
        raw = segment.read_batch(entry.position, HEADER_SIZE)
        if len(raw) < HEADER_SIZE:
            raise CorruptIndex(f"{offset_index.path}: {entry} points past the log")
        h = HEADER.unpack(raw)
        if h[F_MAGIC] != MAGIC_V2 or h[F_BASE_OFFSET] + h[F_LAST_DELTA] != entry.offset:
            raise CorruptIndex(f"{offset_index.path}: {entry} points at no such batch")


def producer_batches(segment: RecoverableSegment, position: int = 0
                     ) -> Iterator[tuple[int, HeaderFields]]:
    """Headers of the batches carrying a producer id, from `position` on.

    Rebuilding producer state reads every batch after the last snapshot; most carry
    no producer id, so they are skipped on two fields without a full unpack.
    """
    pos, end = position, segment.size
    while end - pos >= HEADER_SIZE:
        buf = segment.read_batch(pos, min(_RECOVERY_CHUNK, end - pos))
        n, off = len(buf), 0
        while n - off >= HEADER_SIZE:
            size = _LENGTH.unpack_from(buf, off + LENGTH_OFFSET)[0] + LOG_OVERHEAD
            if size < HEADER_SIZE:
                raise CorruptMessage(f"{segment.log_path}: no valid batch header at {pos + off}")
            if pos + off + size > end:
                return
            if _PID.unpack_from(buf, off + PRODUCER_ID_OFFSET)[0] >= 0:
                yield pos + off, HEADER.unpack_from(buf, off)
            off += size
        pos += off
