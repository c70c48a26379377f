"""The records inside a v2 batch: decode, encode, control markers, recompression.

The broker's produce and fetch paths never come here (they only touch the 61-byte
header, see `batch.py`); this serves the log cleaner, transactions, tools and tests.

The record layout and the parser of records live in `record_reader.py`; the batch
header's layout in `batch.py`.
"""

from __future__ import annotations

import enum
import struct
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import crc32c

from odradek.protocol.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TRANSACTIONAL,
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchHeader,
    Compression,
    TimestampType,
    compute_crc,
    iter_headers,
    read_header,
)
from odradek.protocol.compression import compress, compression_type
from odradek.protocol.errors import CorruptMessage
from odradek.protocol.record_reader import Header, Record, decode_records, records_section

__all__ = [
    "ControlType",
    "Header",
    "NewRecord",
    "Record",
    "RecordBatch",
    "decode_batch",
    "decode_batches",
    "encode_batch",
    "encode_control_batch",
    "encode_empty_batch",
    "read_control_record",
    "recompress",
]

Bytes = bytes | bytearray | memoryview

_U32 = struct.Struct(">I")
CONTROL_KEY = struct.Struct(">hh")  # a control record's key: version, type
TXN_MARKER_VALUE = struct.Struct(">hi")  # a transaction marker's value: version, coordinator epoch

_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


class ControlType(enum.IntEnum):
    """The type in a control record's key; transaction markers are the ones we write."""

    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class NewRecord:
    """A record to encode. `timestamp` None means now; `offset_delta` None means the
    previous record's delta plus one (0 for the first record)."""

    key: bytes | None = None
    value: bytes | None = None
    headers: Sequence[Header] = ()
    timestamp: int | None = None
    offset_delta: int | None = None


# A decoded `Record` may be passed back in: its offset becomes `offset - base_offset`,
# which is how the cleaner rewrites a batch and keeps its offsets.
RecordInput = NewRecord | Record | tuple[bytes | None, bytes | None, Sequence[Header], int | None]


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """A decoded batch; the header's other fields are on `header`."""

    header: BatchHeader
    records: list[Record]

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records)

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def compression(self) -> Compression:
        return self.header.compression

    @property
    def is_transactional(self) -> bool:
        return self.header.is_transactional

    @property
    def is_control(self) -> bool:
        return self.header.is_control


# ---------------------------------------------------------------------------- decoding


def _checked_view(buf: Bytes, pos: int, header: BatchHeader, verify_crc: bool) -> memoryview:
    end = pos + header.size
    if end > len(buf):
        raise CorruptMessage(
            f"record batch at {pos} is truncated: {len(buf) - pos} of {header.size} bytes"
        )
    view = memoryview(buf)[pos:end]
    if verify_crc:
        actual = compute_crc(view)
        if actual != header.crc:
            raise CorruptMessage(
                f"record batch at offset {header.base_offset} fails its CRC: "
                f"stored {header.crc:#010x}, computed {actual:#010x}"
            )
    return view


def decode_batch(buf: Bytes, pos: int = 0, *, verify_crc: bool = True) -> RecordBatch:
    """Decode the batch at `pos`, decompressing its records.

    Raises CorruptMessage for anything malformed (CRC, truncation, varints, lengths,
    counts), UnsupportedCompressionType for a compression id Kafka does not define.
    """
    header = read_header(buf, pos)
    view = _checked_view(buf, pos, header, verify_crc)
    body = records_section(view, header.attributes, header.records_count)
    records = decode_records(
        body, header.records_count, header.base_offset, header.base_timestamp,
        header.attributes, header.max_timestamp,
    )  # fmt: skip
    return RecordBatch(header, records)


def decode_batches(
    buf: Bytes, pos: int = 0, end: int | None = None, *, verify_crc: bool = True
) -> Iterator[RecordBatch]:
    """Decode every complete batch in buf[pos:end]; a trailing partial batch is ignored."""
    for start, _ in iter_headers(buf, pos, end):
        yield decode_batch(buf, start, verify_crc=verify_crc)


# ---------------------------------------------------------------------------- encoding


def _write_varint(out: bytearray, n: int) -> None:
    # 64-bit zig-zag is right for 32-bit fields too, as long as n is in range.
    n = (n << 1) ^ (n >> 63)
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(1)  # zig-zag of -1
    else:
        _write_varint(out, len(data))
        out += data


def _encode_record(
    out: bytearray,
    attributes: int,
    timestamp_delta: int,
    offset_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header],
) -> None:
    rec = bytearray()
    rec.append(attributes & 0xFF)
    _write_varint(rec, timestamp_delta)
    _write_varint(rec, offset_delta)
    _write_bytes(rec, key)
    _write_bytes(rec, value)
    _write_varint(rec, len(headers))
    for name, header_value in headers:
        _write_bytes(rec, name.encode())
        _write_bytes(rec, header_value)
    _write_varint(out, len(rec))
    out += rec


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _assemble(header: BatchHeader, body: bytes | bytearray) -> bytes:
    """Header then body, with batchLength and the CRC computed (the header's own ignored)."""
    buf = bytearray(HEADER_SIZE)
    h = header
    try:
        HEADER.pack_into(
            buf, 0, h.base_offset, HEADER_SIZE - LOG_OVERHEAD + len(body),
            h.partition_leader_epoch, MAGIC_V2, 0, h.attributes, h.last_offset_delta,
            h.base_timestamp, h.max_timestamp, h.producer_id, h.producer_epoch,
            h.base_sequence, h.records_count,
        )  # fmt: skip
    except struct.error as exc:
        raise ValueError(f"record batch header field out of range: {exc}") from None
    crc = crc32c.crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:])
    _U32.pack_into(buf, CRC_OFFSET, crc32c.crc32c(body, crc))
    return b"".join((buf, body))


def _batch_attributes(
    compression: Compression,
    timestamp_type: TimestampType,
    transactional: bool,
    control: bool,
    delete_horizon: bool,
) -> int:
    attributes = int(compression) | (int(timestamp_type) << 3)
    if transactional:
        attributes |= ATTR_TRANSACTIONAL
    if control:
        attributes |= ATTR_CONTROL
    if delete_horizon:
        attributes |= ATTR_DELETE_HORIZON
    return attributes


def encode_batch(
    records: Sequence[RecordInput],
    *,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    log_append_time: int | None = None,
    last_offset_delta: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Encode a complete, CRC-correct v2 batch.

    Offsets: each record's delta is its own (`NewRecord.offset_delta`, or a decoded
    `Record`'s offset minus `base_offset`) or the previous one's plus one; deltas must
    increase. `last_offset_delta` defaults to the last record's and may be larger, as
    when the cleaner removed the batch's last records but keeps its offset range.

    Timestamps: baseTimestamp is the first record's, as Java's and librdkafka's builders
    write it, or `delete_horizon_ms` when given (KIP-534: the cleaner stores the
    tombstone horizon there and sets attribute bit 6). With LOG_APPEND_TIME the
    maxTimestamp is `log_append_time` (default now) and readers give every record that.

    Raises ValueError for an empty `records` (see `encode_empty_batch`), decreasing
    offsets, or fields out of their wire range.
    """
    if not records:
        raise ValueError("a record batch needs a record; use encode_empty_batch")
    if timestamp_type == TimestampType.CREATE_TIME and log_append_time is not None:
        raise ValueError("log_append_time needs timestamp_type=LOG_APPEND_TIME")

    now: int | None = None
    body = bytearray()
    base_timestamp = delete_horizon_ms
    max_timestamp = _INT64_MIN
    delta = -1
    for item in records:
        if isinstance(item, NewRecord):
            key, value, headers, timestamp = item.key, item.value, item.headers, item.timestamp
            attributes = 0
            next_delta = delta + 1 if item.offset_delta is None else item.offset_delta
        elif isinstance(item, Record):
            key, value, headers, timestamp = item.key, item.value, item.headers, item.timestamp
            attributes = item.attributes
            next_delta = item.offset - base_offset
        else:
            key, value, headers, timestamp = item
            attributes = 0
            next_delta = delta + 1
        if not delta < next_delta <= _INT32_MAX:
            raise ValueError(
                f"offset delta {next_delta} must be above the previous {delta} and fit int32"
            )
        delta = next_delta
        if timestamp is None:
            if now is None:
                now = _now_ms()
            timestamp = now
        if base_timestamp is None:
            base_timestamp = timestamp
        timestamp_delta = timestamp - base_timestamp
        if not _INT64_MIN <= timestamp_delta <= _INT64_MAX:
            raise ValueError(f"timestamp {timestamp} is too far from {base_timestamp}")
        if timestamp > max_timestamp:
            max_timestamp = timestamp
        _encode_record(body, attributes, timestamp_delta, delta, key, value, headers)
    assert base_timestamp is not None

    if last_offset_delta is None:
        last_offset_delta = delta
    elif last_offset_delta < delta:
        raise ValueError(f"last_offset_delta {last_offset_delta} is below a record's {delta}")
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        max_timestamp = _now_ms() if log_append_time is None else log_append_time

    attributes = _batch_attributes(
        compression, timestamp_type, transactional, control, delete_horizon_ms is not None
    )
    # batchLength and crc are placeholders here: _assemble computes both.
    header = BatchHeader(
        base_offset, 0, partition_leader_epoch, MAGIC_V2, 0, attributes, last_offset_delta,
        base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
        len(records),
    )  # fmt: skip
    if compression != Compression.NONE:
        return _assemble(header, compress(compression, body, compression_level))
    return _assemble(header, body)


def encode_empty_batch(
    *,
    base_offset: int,
    last_offset_delta: int,
    max_timestamp: int,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A batch header with no records, uncompressed.

    The cleaner writes one when it removes every record of a producer's last batch:
    the header alone keeps the producer's sequence and epoch, and the offset range,
    for idempotence after a restart (Java's DefaultRecordBatch.writeEmptyHeader).
    """
    attributes = _batch_attributes(Compression.NONE, timestamp_type, transactional, control, False)
    header = BatchHeader(
        base_offset, 0, partition_leader_epoch, MAGIC_V2, 0, attributes, last_offset_delta,
        max_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, 0,
    )  # fmt: skip
    return _assemble(header, b"")


# ---------------------------------------------------------------------------- control


def encode_control_batch(
    *,
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    base_offset: int = 0,
    timestamp: int | None = None,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker: one control record, key (version 0, type), value
    (version 0, coordinator epoch), in a transactional control batch."""
    marker = ControlType.COMMIT if commit else ControlType.ABORT
    record = NewRecord(
        key=CONTROL_KEY.pack(0, marker),
        value=TXN_MARKER_VALUE.pack(0, coordinator_epoch),
        timestamp=timestamp,
    )
    return encode_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def read_control_record(record: Record) -> tuple[ControlType, int]:
    """(marker type, coordinator epoch) of a transaction marker record.

    Higher key/value versions are read by their version-0 prefix, as Java does.
    """
    key, value = record.key, record.value
    if key is None or len(key) < CONTROL_KEY.size:
        raise CorruptMessage("control record key is shorter than version and type")
    version, type_id = CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptMessage(f"control record key has negative version {version}")
    try:
        marker = ControlType(type_id)
    except ValueError:
        raise CorruptMessage(f"control record type {type_id} is not a transaction marker") from None
    if value is None or len(value) < TXN_MARKER_VALUE.size:
        raise CorruptMessage("transaction marker value is shorter than version and epoch")
    version, coordinator_epoch = TXN_MARKER_VALUE.unpack_from(value)
    if version < 0:
        raise CorruptMessage(f"transaction marker value has negative version {version}")
    return marker, coordinator_epoch


# ---------------------------------------------------------------------------- recompress


def recompress(batch: Bytes, codec: Compression, level: int | None = None) -> bytes:
    """The same batch with its records section in `codec`.

    Every other field stays: offsets, timestamps, producer fields, the other attribute
    bits and the records' bytes themselves, which are never re-encoded. Used when a
    topic's compression.type differs from what the producer sent. The CRC is checked
    first, so a corrupt batch is not given a fresh valid CRC.
    """
    header = read_header(batch)
    view = _checked_view(batch, 0, header, verify_crc=True)
    target = compression_type(codec)
    if header.attributes & ATTR_COMPRESSION_MASK == target:
        return bytes(view)
    body = records_section(view, header.attributes, header.records_count)
    attributes = (header.attributes & ~ATTR_COMPRESSION_MASK) | target
    return _assemble(replace(header, attributes=attributes), compress(target, body, level))
