"""Finding records by timestamp in a segment (ListOffsets with a time, MAX_TIMESTAMP).

The time index narrows the search to an index interval, the batch headers to a batch,
and that one batch is decoded: the only place a broker decodes records to answer a
read.
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.protocol.batch import (
    F_BASE_OFFSET,
    F_EPOCH,
    F_LAST_DELTA,
    F_LENGTH,
    F_MAX_TS,
    LOG_OVERHEAD,
    HeaderFields,
)
from odradek.protocol.records import decode_batch
from odradek.storage.segment import LogSegment, OffsetAndTimestamp


def find_offset_by_timestamp(segment: LogSegment, timestamp: int, starting_offset: int
                             ) -> OffsetAndTimestamp | None:
    """The first record with timestamp ≥ `timestamp` and offset ≥ `starting_offset`."""
    entry = segment.time_index.lookup(timestamp)
    position = segment.position_for(max(entry.offset, starting_offset))
    for pos, h in segment.batches_from(position):
        if h[F_MAX_TS] >= timestamp and h[F_BASE_OFFSET] + h[F_LAST_DELTA] >= starting_offset:
            found = _search_batch(
                segment, pos, h, lambda ts, off: ts >= timestamp and off >= starting_offset
            )
            if found is not None:
                return found
    return None


def max_timestamp_record(segment: LogSegment) -> OffsetAndTimestamp | None:
    """The max timestamp and the offset of the first record carrying it."""
    ts = segment.max_timestamp
    if segment.size == 0:
        return None
    for pos, h in segment.batches_from(segment.position_for(segment.offset_of_max_timestamp)):
        if h[F_MAX_TS] == ts:
            found = _search_batch(segment, pos, h, lambda t, _off: t == ts)
            if found is not None:
                return found
            return OffsetAndTimestamp(h[F_BASE_OFFSET] + h[F_LAST_DELTA], ts, h[F_EPOCH])
    return None


def _search_batch(segment: LogSegment, pos: int, h: HeaderFields,
                  match: Callable[[int, int], bool]) -> OffsetAndTimestamp | None:
    raw = segment.read_batch(pos, h[F_LENGTH] + LOG_OVERHEAD)
    for record in decode_batch(raw, verify_crc=False).records:
        if match(record.timestamp, record.offset):
            return OffsetAndTimestamp(record.offset, record.timestamp, h[F_EPOCH])
    return None
