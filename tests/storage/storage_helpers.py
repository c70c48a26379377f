"""Batches for storage tests, built by kafka-python's encoder (an independent one)."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder

BASE_TS = 1_700_000_000_000


def make_batch(
    values: Sequence[bytes] = (b"v",),
    *,
    timestamps: Sequence[int] | None = None,
    keys: Sequence[bytes | None] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: int = 0,
    transactional: bool = False,
) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for i, value in enumerate(values):
        ts = BASE_TS + i if timestamps is None else timestamps[i]
        key = None if keys is None else keys[i]
        builder.append(i, ts, key, value, [])
    return bytearray(builder.build())


def idempotent_batch(
    pid: int, epoch: int, seq: int, count: int = 1, ts: int = BASE_TS
) -> bytearray:
    return make_batch(
        [b"x"] * count,
        timestamps=[ts] * count,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def set_attribute_bits(batch: bytearray, bits: int) -> bytearray:
    """Set attribute bits and fix the CRC (e.g. to forge a control batch)."""
    (attrs,) = struct.unpack_from(">h", batch, 21)
    struct.pack_into(">h", batch, 21, attrs | bits)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return batch


def base_offsets(data: bytes) -> list[int]:
    """Base offset of each whole batch in `data`."""
    out = []
    pos = 0
    while len(data) - pos >= 12:
        base, length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + length > len(data):
            break
        out.append(base)
        pos += 12 + length
    return out


class Clock:
    def __init__(self, now: int = BASE_TS) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now
