"""The record batches of a log file as Kafka's DumpLogSegments sees them.

Kafka's FileRecords/FileLogInputStream rules, read by position (no mmap, so a broker
truncating the file while we read cannot kill us with SIGBUS): a batch is yielded only
when complete, a size below 14 is corrupt, and a partial batch at the end ends the
iteration. Batches of every magic are shown: v2 record batches and v0/v1 messages
(with a compressed wrapper's inner messages). Nothing here knows about the tool's
options; `dump.py` puts the lines together.
"""

from __future__ import annotations

import os
import stat
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import crc32c

from odradek.protocol.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    ATTRIBUTES_OFFSET,
    HEADER,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    RECORDS_COUNT_OFFSET,
)
from odradek.protocol.compression import decompress
from odradek.protocol.errors import KafkaError
from odradek.protocol.records import CONTROL_KEY, TXN_MARKER_VALUE, decode_batch
from odradek.storage import dump_decoders

__all__ = [
    "Batch",
    "DumpError",
    "File",
    "FileSkipped",
    "Shown",
    "batch_line",
    "control_text",
    "iter_batches",
    "java_bool",
    "records",
    "slice_batches",
    "timestamp_type",
]

INT32_MAX = (1 << 31) - 1

# FileLogInputStream's first read, the same for every magic: offset, size,
# partitionLeaderEpoch (v2) or crc (v0/v1), magic.
_LOG_HEAD = struct.Struct(">qiib")
_LEGACY_MIN_SIZE = 14  # LegacyRecord.RECORD_OVERHEAD_V0: the smallest size Kafka accepts
_LEGACY_HEAD = struct.Struct(">Ibb")  # crc, magic, attributes
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_TXN_MARKERS = {0: "ABORT", 1: "COMMIT"}
_KRAFT_CONTROL_LABELS = {2: "LeaderChange:", 3: "SnapshotHeader", 4: "SnapshotFooter",
                         5: "KRaftVersion", 6: "KRaftVoters"}  # fmt: skip


class DumpError(Exception):
    """Stops the dump: one line for stderr, and the tool exits non-zero."""


class FileSkipped(DumpError):
    """Kafka reports this file's problem and goes on with the next file."""


class File:
    """A file read by position, the way Kafka's FileRecords reads it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise DumpError(f"{path}: {exc.strerror}") from None
        info = os.fstat(self._fd)
        if stat.S_ISDIR(info.st_mode):
            os.close(self._fd)
            raise DumpError(f"{path}: Is a directory")
        self.size = info.st_size

    def read(self, pos: int, n: int) -> bytes:
        return os.pread(self._fd, n, pos) if n > 0 else b""

    def __enter__(self) -> File:
        return self

    def __exit__(self, *_: object) -> None:
        os.close(self._fd)


def java_bool(value: object) -> str:
    return "true" if value else "false"


def i32(n: int) -> int:
    """n wrapped to a Java int."""
    return (n + (1 << 31)) % (1 << 32) - (1 << 31)


def increment_sequence(sequence: int, increment: int) -> int:
    """DefaultRecordBatch.incrementSequence, with Java's int arithmetic."""
    if sequence > i32(INT32_MAX - increment):
        return i32(increment - i32(INT32_MAX - sequence) - 1)
    return i32(sequence + increment)


def timestamp_type(magic: int, attributes: int) -> str:
    if magic == 0:
        return "NoTimestampType"
    return "LogAppendTime" if attributes & ATTR_TIMESTAMP_TYPE else "CreateTime"


def _codec(attributes: int) -> str:
    try:
        return _CODECS[attributes & ATTR_COMPRESSION_MASK]
    except KeyError:
        raise DumpError(
            f"Unknown compression type id: {attributes & ATTR_COMPRESSION_MASK}"
        ) from None


@dataclass(frozen=True, slots=True)
class Batch:
    position: int
    size: int  # batchLength + 12
    magic: int
    data: bytes  # the batch; a v2 batch shorter than its header is padded with what follows

    @property
    def last_offset(self) -> int:
        (offset,) = _I64.unpack_from(self.data)
        if self.magic >= 2:
            (delta,) = _I32.unpack_from(self.data, LAST_OFFSET_DELTA_OFFSET)
            return int(offset + delta)
        return int(offset)

    @property
    def attributes(self) -> int:
        if self.magic >= 2:
            return int(_I16.unpack_from(self.data, ATTRIBUTES_OFFSET)[0])
        return int(_LEGACY_HEAD.unpack_from(self.data, LOG_OVERHEAD)[2])

    @property
    def is_control(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & ATTR_CONTROL)


def iter_batches(f: File, start: int, end: int) -> Iterator[Batch]:
    """FileLogInputStream over [start, end): complete batches, then stop."""
    pos = start
    while pos < end - _LOG_HEAD.size:
        head = f.read(pos, _LOG_HEAD.size)
        if len(head) < _LOG_HEAD.size:
            return  # the file shrank under us (a broker truncating it)
        _, length, _, magic = _LOG_HEAD.unpack(head)
        if length < _LEGACY_MIN_SIZE:
            raise DumpError(
                f"Found record size {length} smaller than minimum record overhead "
                f"({_LEGACY_MIN_SIZE}) in file {f.path}."
            )
        if pos > end - LOG_OVERHEAD - length:
            return
        size = length + LOG_OVERHEAD
        # Kafka reads a v2 header as 61 bytes, whatever size the batch claims.
        want = max(size, HEADER.size) if magic >= 2 else size
        data = f.read(pos, want)
        if len(data) < want:
            if len(data) < size:
                return
            raise DumpError(
                f"Failed to read `record batch header` from file {f.path}. Expected to read "
                f"{want} bytes, but reached end of file after reading {len(data)} bytes. "
                f"Started read from position {pos}."
            )
        yield Batch(pos, size, magic, data)
        pos += size


def slice_batches(f: File, position: int, size: int) -> Iterator[Batch]:
    """FileRecords.slice(position, size).batches(), with slice's argument checks."""
    if position < 0:
        raise DumpError(f"Invalid position: {position} in read from {f.path}")
    if position > f.size:
        raise DumpError(f"Slice from position {position} exceeds end position of {f.path}")
    return iter_batches(f, position, position + min(size, f.size - position))


def batch_line(batch: Batch) -> str:
    """DumpLogSegments.printBatchLevel."""
    if batch.magic < 2:
        outer = _legacy_message(batch.data, LOG_OVERHEAD, batch.size - LOG_OVERHEAD)
        return (
            f"offset: {batch.last_offset} position: {batch.position} "
            f"{timestamp_type(batch.magic, outer.attributes)}: {outer.timestamp} "
            f"size: {batch.size} magic: {batch.magic} compresscodec: {_codec(outer.attributes)} "
            f"crc: {outer.crc} isvalid: {java_bool(outer.valid)}"
        )
    (base_offset, _, leader_epoch, magic, crc, attributes, last_delta, base_timestamp,
     max_timestamp, producer_id, producer_epoch, base_sequence, count,
     ) = HEADER.unpack_from(batch.data)  # fmt: skip
    last_sequence = -1 if base_sequence == -1 else increment_sequence(base_sequence, last_delta)
    horizon = "OptionalLong.empty"
    if attributes & ATTR_DELETE_HORIZON:
        horizon = f"OptionalLong[{base_timestamp}]"
    covered = batch.data[ATTRIBUTES_OFFSET : batch.size]
    valid = batch.size >= HEADER.size and crc == crc32c.crc32c(covered)
    return (
        f"baseOffset: {base_offset} lastOffset: {base_offset + last_delta} count: {count} "
        f"baseSequence: {base_sequence} lastSequence: {last_sequence} "
        f"producerId: {producer_id} producerEpoch: {producer_epoch} "
        f"partitionLeaderEpoch: {leader_epoch} "
        f"isTransactional: {java_bool(attributes & ATTR_TRANSACTIONAL)} "
        f"isControl: {java_bool(attributes & ATTR_CONTROL)} deleteHorizonMs: {horizon} "
        f"position: {batch.position} {timestamp_type(magic, attributes)}: {max_timestamp} "
        f"size: {batch.size} magic: {magic} compresscodec: {_codec(attributes)} "
        f"crc: {crc} isvalid: {java_bool(valid)}"
    )


@dataclass(frozen=True, slots=True)
class Shown:
    """One record as the tool shows it: from a v2 batch, or a legacy message."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    sequence: int = -1
    header_keys: tuple[str, ...] = ()
    legacy_check: str = ""  # " isValid: … crc: …", printed for legacy messages only


def records(batch: Batch) -> list[Shown]:
    """The batch's records, as Kafka's deep iteration yields them (the CRC unchecked)."""
    if batch.magic < 2:
        return _legacy_records(batch)
    if _I32.unpack_from(batch.data, RECORDS_COUNT_OFFSET)[0] == 0:
        return []  # Kafka does not look at the records section of an empty batch
    try:
        decoded = decode_batch(batch.data[: batch.size], verify_crc=False)
    except KafkaError as exc:
        raise DumpError(f"Record batch at position {batch.position}: {exc}") from None
    base_offset, base_sequence = decoded.header.base_offset, decoded.header.base_sequence
    out: list[Shown] = []
    for r in decoded.records:
        # DefaultRecord.sequence: only a non-negative base sequence counts.
        sequence = -1
        if base_sequence >= 0:
            sequence = increment_sequence(base_sequence, r.offset - base_offset)
        keys = tuple(name for name, _ in r.headers)
        out.append(Shown(r.offset, r.timestamp, r.key, r.value, sequence, keys))
    return out


def control_text(record: Shown) -> str:
    """DumpLogSegments.printControlRecord: what follows a control record's metadata."""
    key = record.key
    if key is None or len(key) < CONTROL_KEY.size:
        raise DumpError(
            "Invalid value size found for end control record key. Must have at least 4 "
            f"bytes, but found only {0 if key is None else len(key)}"
        )
    version, type_id = CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise DumpError(
            f"Invalid version found for control record: {version}. May indicate data corruption"
        )
    if type_id in _TXN_MARKERS:
        value = record.value or b""
        if len(value) < TXN_MARKER_VALUE.size:
            raise DumpError(
                "Invalid value size found for end transaction marker. Must have at least 6 "
                f"bytes, but found only {len(value)}"
            )
        marker_version, coordinator_epoch = TXN_MARKER_VALUE.unpack_from(value)
        if marker_version < 0:
            raise DumpError(
                f"Invalid version found for end transaction marker: {marker_version}. "
                "May indicate data corruption"
            )
        return f" endTxnMarker: {_TXN_MARKERS[type_id]} coordinatorEpoch: {coordinator_epoch}"
    if type_id in _KRAFT_CONTROL_LABELS:
        try:
            body = dump_decoders.control_record_json(type_id, record.value)
        except dump_decoders.DecoderError as exc:
            raise DumpError(str(exc)) from None
        return f" {_KRAFT_CONTROL_LABELS[type_id]} {body}"
    return f" controlType: UNKNOWN({type_id})"


# ---------------------------------------------------------------------------- legacy


@dataclass(frozen=True, slots=True)
class _Legacy:
    crc: int
    valid: bool
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def _legacy_message(data: bytes, start: int, size: int) -> _Legacy:
    """A v0/v1 message (Kafka's LegacyRecord) of `size` bytes at data[start:]."""
    body = data[start : start + size]
    if len(body) < _LEGACY_MIN_SIZE:
        raise DumpError(f"Legacy message of {size} bytes is shorter than its header")
    crc, magic, attributes = _LEGACY_HEAD.unpack_from(body)
    pos = _LEGACY_HEAD.size
    timestamp = -1
    if magic > 0:
        if len(body) < _LEGACY_MIN_SIZE + _I64.size:
            raise DumpError(f"Legacy v1 message of {size} bytes is shorter than its header")
        (timestamp,) = _I64.unpack_from(body, pos)
        pos += _I64.size
    fields: list[bytes | None] = []
    for _ in range(2):
        if len(body) - pos < _I32.size:
            raise DumpError("Legacy message is truncated")
        (n,) = _I32.unpack_from(body, pos)
        pos += _I32.size
        if n > len(body) - pos:
            raise DumpError(f"Legacy message field of {n} bytes runs past the message")
        fields.append(None if n < 0 else body[pos : pos + n])
        pos += max(n, 0)
    # The legacy CRC is CRC32 (not CRC32C), from the magic byte to the end.
    return _Legacy(crc, crc == zlib.crc32(body[4:]), attributes, timestamp, fields[0], fields[1])


def _legacy_shown(offset: int, message: _Legacy) -> Shown:
    check = f" isValid: {java_bool(message.valid)} crc: {message.crc}"
    return Shown(offset, message.timestamp, message.key, message.value, legacy_check=check)


def _legacy_records(batch: Batch) -> list[Shown]:
    """AbstractLegacyRecordBatch's iterator: the message itself, or a wrapper's inner ones."""
    outer = _legacy_message(batch.data, LOG_OVERHEAD, batch.size - LOG_OVERHEAD)
    offset = batch.last_offset
    if outer.attributes & 0x07 == 0:
        return [_legacy_shown(offset, outer)]
    if outer.value is None:
        raise DumpError(
            f"Found invalid compressed record set with null value (magic = {batch.magic})"
        )
    try:
        data = decompress(outer.attributes & 0x07, outer.value)
    except KafkaError as exc:
        raise DumpError(str(exc)) from None
    inner: list[tuple[int, _Legacy]] = []
    pos = 0
    while len(data) - pos >= LOG_OVERHEAD:
        inner_offset, size = struct.unpack_from(">qi", data, pos)
        if size < _LEGACY_MIN_SIZE:
            raise DumpError(f"Record size {size} is less than the minimum record overhead (14)")
        if len(data) - pos - LOG_OVERHEAD < size:
            break
        message = _legacy_message(data, pos + LOG_OVERHEAD, size)
        if batch.magic == 1 and outer.attributes & 0x08:
            # Under LogAppendTime every inner message has the wrapper's timestamp.
            message = _Legacy(message.crc, message.valid, message.attributes,
                              outer.timestamp, message.key, message.value)  # fmt: skip
        inner.append((inner_offset, message))
        pos += LOG_OVERHEAD + size
    if not inner:
        raise DumpError("Found invalid compressed record set with no inner records")
    # v1 inner offsets are relative: the wrapper's offset is the last inner message's
    # (or 0, from some librdkafka versions, which Kafka accepts). v0's are absolute.
    base = 0
    if batch.magic > 0 and offset != 0:
        if offset < inner[-1][0]:
            raise DumpError(
                "Found invalid wrapper offset in compressed v1 message set, wrapper offset "
                f"'{offset}' is less than the last inner message offset '{inner[-1][0]}' "
                "and it is not zero."
            )
        base = offset - inner[-1][0]
    return [_legacy_shown(base + o, m) for o, m in inner]
