"""Hand-built v2 batch bytes for parser tests: records exactly as given, valid CRCs.

Built with plain struct formats, not odradek's codec, so that the codec is on trial."""

from __future__ import annotations

import struct

import crc32c


def zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def restamp(buf: bytearray) -> bytes:
    """The batch with its CRC32C recomputed (attributes to the end)."""
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


def raw_batch(body: bytes, count: int, attributes: int = 0) -> bytes:
    """A batch whose records section is `body` as given, with a valid CRC."""
    fields = (0, 49 + len(body), -1, 2, 0, attributes, max(count - 1, 0), 0, 0, -1, -1, -1, count)
    return restamp(bytearray(struct.pack(">qiibIhiqqqhii", *fields) + body))


def record_bytes(*fields: bytes) -> bytes:
    """One record: its fields after a length prefix."""
    inner = b"".join(fields)
    return zigzag(len(inner)) + inner
