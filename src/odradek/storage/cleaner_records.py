"""How the cleaner reads a log: segments in groups, batches in chunks, and of each
record only what it needs — offset, key, whether it has a value — fast.

A full decode (records.decode_batch) builds a Record with timestamp, value and headers
for every record; the cleaner only looks at keys, to fill its offset map and to decide
what stays, and decodes a batch fully only when it must rewrite it (some records stay,
some go). Skipping the rest of each record by its length prefix makes the offset map
pass and the common whole-batch decisions about three times cheaper.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from kio.serial.errors import DecodeError
from kio.serial.readers import read_signed_varint as _varint
from kio.serial.readers import read_signed_varlong as _varlong

from odradek.protocol.batch import ATTR_COMPRESSION_MASK, HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2
from odradek.protocol.compression import compression_type, decompress
from odradek.protocol.errors import CorruptMessage
from odradek.storage.segment import (
    F_LENGTH,
    F_MAGIC,
    HEADER,
    MIN_BATCH_LENGTH,
    Header,
    LogSegment,
)

INT32_MAX = (1 << 31) - 1

RecordKey = tuple[int, bytes | None, bool]  # (offset, key, has a value)


def records_section(view: memoryview, attributes: int, count: int) -> bytes:
    """The batch's records, decompressed. As bytes: indexing and slicing bytes is
    cheaper than a memoryview, and worth the one copy."""
    raw = view[HEADER_SIZE:]
    codec = attributes & ATTR_COMPRESSION_MASK
    if codec == 0 or (count == 0 and not raw):
        return bytes(raw)
    return bytes(decompress(compression_type(codec), raw))


def record_keys(
    view: memoryview, base_offset: int, attributes: int, count: int
) -> list[RecordKey]:
    """(offset, key, has value) of each record of one batch."""
    body = records_section(view, attributes, count)
    out: list[RecordKey] = []
    append = out.append
    end = len(body)
    pos = 0
    try:
        for _ in range(count):
            # Varints of one and two bytes (lengths under 8 KiB, offset deltas under
            # 8192) are decoded inline; longer ones by kio's native reader.
            b = body[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif body[pos + 1] < 0x80:
                v = (b & 0x7F) | (body[pos + 1] << 7)
                length = (v >> 1) ^ -(v & 1)
                pos += 2
            else:
                length, n = _varint(body, pos)
                pos += n
            record_end = pos + length
            if length < 6 or record_end > end:
                raise CorruptMessage(f"record length {length} out of bounds at {pos}")
            b = body[pos + 1]  # after the attributes byte: the timestamp delta
            if b < 0x80:
                pos += 2
            elif body[pos + 2] < 0x80:
                pos += 3
            else:
                _, n = _varlong(body, pos + 1)
                pos += n + 1
            b = body[pos]
            if b < 0x80:
                delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif body[pos + 1] < 0x80:
                v = (b & 0x7F) | (body[pos + 1] << 7)
                delta = (v >> 1) ^ -(v & 1)
                pos += 2
            else:
                delta, n = _varint(body, pos)
                pos += n
            b = body[pos]
            if b < 0x80:
                size = (b >> 1) ^ -(b & 1)
                pos += 1
            elif body[pos + 1] < 0x80:
                v = (b & 0x7F) | (body[pos + 1] << 7)
                size = (v >> 1) ^ -(v & 1)
                pos += 2
            else:
                size, n = _varint(body, pos)
                pos += n
            if size >= 0:
                key: bytes | None = body[pos : pos + size]
                pos += size
            else:
                key = None
            # A null value's length is -1, zig-zag 0x01: the only odd first byte.
            append((base_offset + delta, key, body[pos] != 1))
            pos = record_end
    except (IndexError, ValueError, DecodeError) as exc:
        raise CorruptMessage(f"malformed record in the batch at offset {base_offset}: {exc}") \
            from None
    return out


def read_batches(
    segment: LogSegment, position: int, chunk: int
) -> Iterator[tuple[int, memoryview, Header]]:
    """(position, bytes, header) of each batch from `position`, read `chunk` at a time
    (a batch larger than the chunk is read on its own)."""
    end = segment.size
    pos = position
    while end - pos >= HEADER_SIZE:
        buf = segment.read_batch(pos, min(chunk, end - pos))
        view = memoryview(buf)
        off = 0
        while len(buf) - off >= HEADER_SIZE:
            h: Header = HEADER.unpack_from(buf, off)
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
