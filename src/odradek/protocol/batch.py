"""The fixed 61-byte header of a v2 record batch, read and patched in place.

This is all the broker's hot path needs: produce validates and patches headers, fetch
hands file bytes back; nothing here decodes individual records (see `records.py`).

Layout (big-endian), offsets from the batch start:
    0 baseOffset i64 · 8 batchLength i32 · 12 partitionLeaderEpoch i32 · 16 magic i8 ·
    17 crc u32 · 21 attributes i16 · 23 lastOffsetDelta i32 · 27 baseTimestamp i64 ·
    35 maxTimestamp i64 · 43 producerId i64 · 51 producerEpoch i16 ·
    53 baseSequence i32 · 57 recordsCount i32 · 61 records…
The CRC32C covers everything from `attributes` to the end of the batch.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

from odradek.protocol.errors import CorruptMessage

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted in batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # the smallest batchLength a v2 batch has
MAGIC_V2 = 2

# Byte offsets of the fields, from the batch start.
BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1

# The whole header as one struct. Hot paths (segment scans, the cleaner, recovery)
# unpack it to a plain tuple, cheaper than a BatchHeader, and index it by these names.
HEADER = struct.Struct(">qiibIhiqqqhii")
HeaderFields = tuple[int, ...]
F_BASE_OFFSET, F_LENGTH, F_EPOCH, F_MAGIC, F_CRC, F_ATTRS = 0, 1, 2, 3, 4, 5
F_LAST_DELTA, F_BASE_TS, F_MAX_TS, F_PID, F_PEPOCH, F_BASE_SEQ, F_COUNT = range(6, 13)
# baseOffset to lastOffsetDelta: all that finding a batch by offset needs.
PREFIX = struct.Struct(">qiibIhi")
assert HEADER.size == HEADER_SIZE and PREFIX.size == LAST_OFFSET_DELTA_OFFSET + 4

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & ATTR_COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes & ATTR_TIMESTAMP_TYPE) >> 3)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        # Sequences wrap at 2^31 like Kafka's DefaultRecordBatch.incrementSequence.
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the header at `pos`. Raises CorruptMessage when it cannot be a v2 batch."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptMessage(f"record batch header truncated at {pos}")
    fields = HEADER.unpack_from(buf, pos)
    header = BatchHeader(*fields)
    if header.magic != MAGIC_V2:
        raise CorruptMessage(f"unsupported record batch magic {header.magic}")
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptMessage(f"record batch length {header.batch_length} is too small")
    return header


def iter_headers(
    buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each complete batch in buf[pos:end].

    Stops silently at a trailing partial batch: fetch responses may end with one, and a
    log's torn tail looks like one. Raises CorruptMessage on a batch that is not v2.
    """
    limit = len(buf) if end is None else end
    while limit - pos >= HEADER_SIZE:
        header = read_header(buf, pos)
        if pos + header.size > limit:
            return
        yield pos, header
        pos += header.size


def compute_crc(batch: bytes | bytearray | memoryview) -> int:
    """CRC32C of a whole batch's covered region (attributes to the end)."""
    return int(crc32c.crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))


def crc_is_valid(batch: bytes | bytearray | memoryview, header: BatchHeader) -> bool:
    return compute_crc(batch) == header.crc


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Patch baseOffset in place; it lies outside the CRC, so the CRC stays valid."""
    _I64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Patch partitionLeaderEpoch in place; also outside the CRC."""
    _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, size: int, timestamp: int) -> None:
    """Stamp a batch with LogAppendTime: set the type bit and maxTimestamp, redo the CRC.

    Used when a topic's `message.timestamp.type` is LogAppendTime; consumers then read
    every record's timestamp as maxTimestamp.
    """
    (attributes,) = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | ATTR_TIMESTAMP_TYPE)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    crc = compute_crc(memoryview(buf)[pos : pos + size])
    _U32.pack_into(buf, pos + CRC_OFFSET, crc)
