"""The one parser of the records inside a v2 batch, in two depths with one strictness.

`decode_records` builds a full `Record` for each record (tools, transactions, the
cleaner's rewrite, tests); `record_keys` reads only offset, key and whether a value is
there (the cleaner's offset map and its keep/drop decisions), skipping the rest of
each record by its length prefix, about three times cheaper. Both refuse the same
corruption, as Kafka's DefaultRecord does: a record length below the smallest record
or past the section's end, a key or value length below -1 (-1 is null), a field that
runs past its record's end.

A record, after the batch header (and after decompression of the records section):
    length varint · attributes i8 · timestampDelta varlong · offsetDelta varint ·
    keyLength varint (-1 null) · key · valueLength varint (-1 null) · value ·
    headerCount varint · headers (keyLength varint · utf-8 key ·
    valueLength varint (-1 null) · value)…
Varints are zig-zag encoded, as in protobuf. Varints in their one- or two-byte form
(most lengths and small deltas) are decoded inline and longer ones by kio's native
reader: measured faster than either alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.serial.errors import DecodeError
from kio.serial.readers import read_signed_varint as _varint
from kio.serial.readers import read_signed_varlong as _varlong

from odradek.protocol.batch import ATTR_COMPRESSION_MASK, ATTR_TIMESTAMP_TYPE, HEADER_SIZE
from odradek.protocol.compression import compression_type, decompress
from odradek.protocol.errors import CorruptMessage

__all__ = [
    "MIN_RECORD_SIZE",
    "Header",
    "Record",
    "RecordKey",
    "decode_records",
    "record_keys",
    "records_section",
]

Header = tuple[str, bytes | None]
RecordKey = tuple[int, bytes | None, bool]  # (offset, key, has a value)

# length, attributes, timestampDelta, offsetDelta, keyLength, valueLength, headerCount:
# one byte each at least, so a records section cannot hold more records than this allows.
MIN_RECORD_SIZE = 7
# The smallest value of a record's length prefix (the prefix itself not counted).
_MIN_RECORD_LENGTH = MIN_RECORD_SIZE - 1


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded record. `offset` and `timestamp` are absolute, not deltas.

    `attributes` is the record's own attribute byte as 0..255 (unused by Kafka, kept so a
    rewrite reproduces it), not the batch's.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    attributes: int = 0


def records_section(view: memoryview, attributes: int, count: int) -> bytes:
    """A whole batch's records section, decompressed. As bytes: indexing and slicing
    bytes is cheaper than a memoryview, and worth the one copy."""
    raw = view[HEADER_SIZE:]
    codec = attributes & ATTR_COMPRESSION_MASK
    # Java returns no records for a count of 0 without decompressing, so an empty
    # section under a compression bit is a valid empty batch.
    if codec == 0 or (count == 0 and not raw):
        return bytes(raw)
    return bytes(decompress(compression_type(codec), raw))


def check_count(count: int, body: bytes) -> None:
    if count < 0 or count > len(body) // MIN_RECORD_SIZE:
        raise CorruptMessage(f"record count {count} does not fit in {len(body)} bytes")


def decode_records(
    body: bytes, count: int, base_offset: int, base_timestamp: int, attributes: int,
    max_timestamp: int,
) -> list[Record]:
    """Every record of a records section. Raises CorruptMessage for anything malformed."""
    check_count(count, body)
    try:
        return _decode_records(
            body, count, base_offset, base_timestamp,
            max_timestamp if attributes & ATTR_TIMESTAMP_TYPE else None,
        )  # fmt: skip
    except UnicodeDecodeError as exc:
        raise CorruptMessage(f"record header key is not utf-8: {exc}") from None
    except (IndexError, ValueError, DecodeError) as exc:
        # Reading past the section's end, or a varint longer than 5 (10) bytes.
        raise CorruptMessage(
            f"record batch at offset {base_offset} has a malformed record: {exc}"
        ) from None


def _decode_records(
    body: bytes, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None
) -> list[Record]:
    end = len(body)
    records: list[Record] = []
    append = records.append
    pos = 0
    for _ in range(count):
        b = body[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            length, n = _varint(body, pos)
            pos += n
        if length < _MIN_RECORD_LENGTH or length > end - pos:
            raise CorruptMessage(f"record length {length} out of bounds at {pos}")
        record_end = pos + length
        attributes = body[pos]
        b = body[pos + 1]
        if b < 0x80:
            timestamp_delta = (b >> 1) ^ -(b & 1)
            pos += 2
        else:
            timestamp_delta, n = _varlong(body, pos + 1)
            pos += n + 1
        b = body[pos]
        if b < 0x80:
            offset_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            offset_delta, n = _varint(body, pos)
            pos += n
        b = body[pos]
        if b < 0x80:
            size = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            size, n = _varint(body, pos)
            pos += n
        if size >= 0:
            key: bytes | None = body[pos : pos + size]
            pos += size
        elif size == -1:
            key = None
        else:
            raise CorruptMessage(f"negative key length {size}")
        b = body[pos]
        if b < 0x80:
            size = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            size, n = _varint(body, pos)
            pos += n
        if size >= 0:
            value: bytes | None = body[pos : pos + size]
            pos += size
        elif size == -1:
            value = None
        else:
            raise CorruptMessage(f"negative value length {size}")
        b = body[pos]
        headers: tuple[Header, ...] = ()
        if b:  # zig-zag 0, no headers: by far the most common case
            headers = _decode_headers(body, pos, record_end)
            pos = record_end
        else:
            pos += 1
        # Lengths above were not checked against the record's end: a field that runs
        # past it leaves pos elsewhere than at record_end, which this catches.
        if pos != record_end:
            raise CorruptMessage(
                f"record at offset delta {offset_delta} declares {length} bytes "
                f"but its fields take {pos - record_end + length}"
            )
        append(
            Record(
                base_offset + offset_delta,
                base_timestamp + timestamp_delta if log_append_time is None else log_append_time,
                key,
                value,
                headers,
                attributes,
            )
        )
    if pos != end:
        raise CorruptMessage(f"{end - pos} bytes left after the batch's {count} records")
    return records


def _decode_headers(body: bytes, pos: int, end: int) -> tuple[Header, ...]:
    count, n = _varint(body, pos)
    pos += n
    # Each header takes two bytes at least, which bounds a corrupt count.
    if count < 0 or count > (end - pos) // 2:
        raise CorruptMessage(f"record header count {count} out of bounds")
    headers: list[Header] = []
    for _ in range(count):
        size, n = _varint(body, pos)
        pos += n
        if size < 0:
            raise CorruptMessage(f"negative record header key length {size}")
        name = body[pos : pos + size].decode()
        pos += size
        size, n = _varint(body, pos)
        pos += n
        if size >= 0:
            value: bytes | None = body[pos : pos + size]
            pos += size
        elif size == -1:
            value = None
        else:
            raise CorruptMessage(f"negative record header value length {size}")
        headers.append((name, value))
    if pos != end:
        raise CorruptMessage("record headers do not end where the record does")
    return tuple(headers)


def record_keys(
    view: memoryview, base_offset: int, attributes: int, count: int
) -> list[RecordKey]:
    """(offset, key, has a value) of each record of one whole batch."""
    body = records_section(view, attributes, count)
    check_count(count, body)
    try:
        return _record_keys(body, count, base_offset)
    except (IndexError, ValueError, DecodeError) as exc:
        raise CorruptMessage(
            f"record batch at offset {base_offset} has a malformed record: {exc}"
        ) from None


def _record_keys(body: bytes, count: int, base_offset: int) -> list[RecordKey]:
    out: list[RecordKey] = []
    append = out.append
    end = len(body)
    pos = 0
    for _ in range(count):
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
        if length < 6 or length > end - pos:  # 6: _MIN_RECORD_LENGTH, a global lookup less
            raise CorruptMessage(f"record length {length} out of bounds at {pos}")
        record_end = pos + length
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
        elif size == -1:
            key = None
        else:
            raise CorruptMessage(f"negative key length {size}")
        # The value length: -1 (null) is zig-zag 0x01, the one odd byte we expect; an
        # odd first byte is a negative length (its low bit is the zig-zag sign).
        b = body[pos]
        if b & 1 and b != 1 and _varint(body, pos)[0] < -1:
            raise CorruptMessage(f"negative value length {_varint(body, pos)[0]}")
        if pos >= record_end:
            raise CorruptMessage(f"record at offset delta {delta} runs past its length {length}")
        append((base_offset + delta, key, b != 1))
        pos = record_end
    return out


def record_stamps(view: memoryview, base_offset: int, base_timestamp: int, attributes: int,
                  count: int) -> list[tuple[int, int, bool]]:
    """(offset, timestamp, has a key) of each record of one whole batch: what produce
    validation reads (KIP-467's timestamp and key checks), skipping keys, values and
    headers by their record's length. Timestamps are CreateTime (the caller handles a
    LogAppendTime batch)."""
    body = records_section(view, attributes, count)
    check_count(count, body)
    out: list[tuple[int, int, bool]] = []
    append = out.append
    end = len(body)
    pos = 0
    try:
        for _ in range(count):
            length, n = _varint(body, pos)
            pos += n
            if length < _MIN_RECORD_LENGTH or length > end - pos:
                raise CorruptMessage(f"record length {length} out of bounds at {pos}")
            record_end = pos + length
            ts_delta, n = _varlong(body, pos + 1)
            pos += 1 + n
            delta, n = _varint(body, pos)
            pos += n
            key_length, n = _varint(body, pos)
            if key_length < -1 or pos + n > record_end:
                raise CorruptMessage(f"bad key length {key_length} at offset delta {delta}")
            append((base_offset + delta, base_timestamp + ts_delta, key_length != -1))
            pos = record_end
    except (IndexError, ValueError, DecodeError) as exc:
        raise CorruptMessage(
            f"record batch at offset {base_offset} has a malformed record: {exc}") from None
    return out
