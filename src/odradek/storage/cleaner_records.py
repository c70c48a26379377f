"""How the cleaner reads a log: segments in groups, batches in chunks, and of each
record only what it needs — offset, key, whether it has a value — fast.

The records themselves are parsed by protocol/record_reader.py, which owns their
format: the cleaner reads only keys (`record_keys`) to fill its offset map and to
decide what stays, and decodes a batch fully only when it must rewrite it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from odradek.protocol.batch import (
    F_LENGTH,
    F_MAGIC,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    HeaderFields,
)
from odradek.protocol.errors import CorruptMessage
from odradek.storage.segment import LogSegment

INT32_MAX = (1 << 31) - 1


def read_batches(
    segment: LogSegment, position: int, chunk: int
) -> Iterator[tuple[int, memoryview, HeaderFields]]:
    """(position, bytes, header) of each batch from `position`, read `chunk` at a time
    (a batch larger than the chunk is read on its own)."""
    end = segment.size
    pos = position
    while end - pos >= HEADER_SIZE:
        buf = segment.read_batch(pos, min(chunk, end - pos))
        view = memoryview(buf)
        off = 0
        while len(buf) - off >= HEADER_SIZE:
            h: HeaderFields = HEADER.unpack_from(buf, off)
            if h[F_MAGIC] != MAGIC_V2 or h[F_LENGTH] < MIN_BATCH_LENGTH:
                raise CorruptMessage(f"{segment.log_path}: no valid batch header at {pos + off}")
            size = h[F_LENGTH] + LOG_OVERHEAD
            if off + size > len(buf):
                if off == 0:  # one batch bigger than the chunk
                    buf = segment.read_batch(pos, size)
                    if len(buf) < size:
                        raise CorruptMessage(f"{segment.log_path}: torn batch at {pos}")
                    view = memoryview(buf)
                    yield pos, view, h
                    off = size
                break
            yield pos + off, view[off : off + size], h
            off += size
        if off == 0:
            raise CorruptMessage(f"{segment.log_path}: torn batch at {pos}")
        pos += off


def group_segments_by_size(
    segments: Sequence[LogSegment], max_size: int, max_index_size: int, first_uncleanable: int
) -> list[list[LogSegment]]:
    """Kafka's groupSegmentsBySize: consecutive segments whose logs fit one segment,
    whose indexes fit one index, and whose offsets stay relative to the first."""
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_size = segments[i].size
        index_size = segments[i].offset_index.entries * 8
        time_index_size = segments[i].time_index.entries * 12
        i += 1
        while i < len(segments):
            seg = segments[i]
            nxt = segments[i + 1].base_offset if i + 1 < len(segments) else first_uncleanable
            last = nxt - 1
            if not (
                log_size + seg.size <= max_size
                and index_size + seg.offset_index.entries * 8 <= max_index_size
                and time_index_size + seg.time_index.entries * 12 <= max_index_size
                and (seg.size == 0 or last - group[0].base_offset <= INT32_MAX)
            ):
                break
            group.append(seg)
            log_size += seg.size
            index_size += seg.offset_index.entries * 8
            time_index_size += seg.time_index.entries * 12
            i += 1
        groups.append(group)
    return groups
