"""FetchResponse encoding by hand, for the hot path (versions 4-17).

kio would encode each field through Python calls and copy the records twice; here the
response is laid out in one bytearray and each partition's records are copied into it
once. Layout per Kafka's FetchResponse.json: v5 adds log_start_offset, v7 the top-level
error code and session id, v11 preferred_read_replica, v12 flexible encoding (compact
lengths, tagged fields), v13 topic ids instead of names.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">ihqq")  # index, error, high watermark, last stable offset
_I64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")

FIRST_FLEXIBLE = 12
FIRST_TOPIC_ID = 13


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes | bytearray | memoryview
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
    """A whole response frame: size prefix, response header, body."""
    flexible = version >= FIRST_FLEXIBLE
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
            size = len(p.records)
            if flexible:
                _uvarint(out, size + 1)
            else:
                out += _I32.pack(size)
            out += p.records
            if flexible:
                out.append(0)  # partition tagged fields
        if flexible:
            out.append(0)  # topic tagged fields
    if flexible:
        out.append(0)  # response tagged fields
    _I32.pack_into(out, 0, len(out) - 4)
    return out


def _array_len(out: bytearray, n: int, flexible: bool) -> None:
    if flexible:
        _uvarint(out, n + 1)
    else:
        out += _I32.pack(n)
