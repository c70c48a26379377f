"""FetchResponse encoding by hand, for the hot path (versions 4-17).

kio would encode each field through Python calls and copy the records twice; here the
response is laid out in one bytearray and each partition's records are copied into it
once. Layout per Kafka's FetchResponse.json: v5 adds log_start_offset, v7 the top-level
error code and session id, v11 preferred_read_replica, v12 flexible encoding (compact
lengths, tagged fields), v13 topic ids instead of names.

A partition's records may also be a slice of a file (anything with a length that is
not bytes): the frame is then `ResponseParts`, the encoded bytes around each slice, and
the server sends the slices from their files (zero copy); this module never reads them.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">ihqq")  # index, error, high watermark, last stable offset
_I64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")

FIRST_FLEXIBLE = 12
FIRST_TOPIC_ID = 13


class RecordsSlice(Protocol):
    """Records the server sends from where they are (storage's FileRecords)."""

    def __len__(self) -> int: ...


Records = bytes | bytearray | memoryview | RecordsSlice
_BYTES = (bytes, bytearray, memoryview)


class ResponseParts:
    """A response frame as encoded bytes and the record slices between them, in order;
    `len()` is the frame's size (with its 4-byte prefix), as for a bytearray frame."""

    __slots__ = ("parts", "size")

    def __init__(self, parts: list[bytearray | RecordsSlice], size: int) -> None:
        self.parts = parts
        self.size = size

    def __len__(self) -> int:
        return self.size


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: Records
    aborted_transactions: Sequence[tuple[int, int]] | None = None  # (producer id, first offset)
    preferred_read_replica: int = -1


def _uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def encode_fetch_response(
    version: int,
    correlation_id: int,
    topics: Sequence[tuple[str | uuid.UUID, Sequence[FetchedPartition]]],
    *,
    error_code: int = 0,
    session_id: int = 0,
    throttle_ms: int = 0,
) -> bytearray:
    """A whole response frame: size prefix, response header, body (records as bytes)."""
    frame = encode_fetch_parts(version, correlation_id, topics, error_code=error_code,
                               session_id=session_id, throttle_ms=throttle_ms)
    if isinstance(frame, ResponseParts):
        raise TypeError("records given as file slices: use encode_fetch_parts")
    return frame


def encode_fetch_parts(
    version: int,
    correlation_id: int,
    topics: Sequence[tuple[str | uuid.UUID, Sequence[FetchedPartition]]],
    *,
    error_code: int = 0,
    session_id: int = 0,
    throttle_ms: int = 0,
) -> bytearray | ResponseParts:
    """The frame as one bytearray, or as `ResponseParts` when records are file slices."""
    flexible = version >= FIRST_FLEXIBLE
    parts: list[bytearray | RecordsSlice] = []
    size = 0
    out = bytearray(b"\0\0\0\0")
    out += _I32.pack(correlation_id)
    if flexible:
        out.append(0)  # response header tagged fields
    out += _I32.pack(throttle_ms)
    if version >= 7:
        out += _I16.pack(error_code)
        out += _I32.pack(session_id)
    _array_len(out, len(topics), flexible)
    for key, partitions in topics:
        if version >= FIRST_TOPIC_ID:
            assert isinstance(key, uuid.UUID)
            out += key.bytes
        else:
            name = str(key).encode()
            if flexible:
                _uvarint(out, len(name) + 1)
            else:
                out += _I16.pack(len(name))
            out += name
        _array_len(out, len(partitions), flexible)
        for p in partitions:
            out += _PARTITION_HEAD.pack(p.index, p.error_code, p.high_watermark,
                                        p.last_stable_offset)
            if version >= 5:
                out += _I64.pack(p.log_start_offset)
            aborted = p.aborted_transactions
            if aborted is None:
                if flexible:
                    out.append(0)
                else:
                    out += _I32.pack(-1)
            else:
                _array_len(out, len(aborted), flexible)
                for producer_id, first_offset in aborted:
                    out += _ABORTED.pack(producer_id, first_offset)
                    if flexible:
                        out.append(0)
            if version >= 11:
                out += _I32.pack(p.preferred_read_replica)
            records = p.records
            n = len(records)
            if flexible:
                _uvarint(out, n + 1)
            else:
                out += _I32.pack(n)
            if isinstance(records, _BYTES):
                out += records
            elif n:
                parts.append(out)
                parts.append(records)
                size += len(out) + n
                out = bytearray()
            if flexible:
                out.append(0)  # partition tagged fields
        if flexible:
            out.append(0)  # topic tagged fields
    if flexible:
        out.append(0)  # response tagged fields
    if not parts:
        _I32.pack_into(out, 0, len(out) - 4)
        return out
    parts.append(out)
    size += len(out)
    head = parts[0]
    assert isinstance(head, bytearray)
    _I32.pack_into(head, 0, size - 4)
    return ResponseParts(parts, size)


def _array_len(out: bytearray, n: int, flexible: bool) -> None:
    if flexible:
        _uvarint(out, n + 1)
    else:
        out += _I32.pack(n)
