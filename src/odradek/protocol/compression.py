"""Compression of a v2 batch's records section, in the byte formats Kafka's clients use.

Every codec goes through cramjam. Two of them need care to match Kafka's Java client
rather than the library defaults:

- snappy: Java writes snappy-java's framing (`SnappyOutputStream`, called "xerial"
  framing), not raw snappy and not the official snappy frame format. librdkafka writes
  raw snappy, and Java reads that too when the magic is missing, so we read both.
- lz4: Kafka's `KafkaLZ4BlockInputStream` refuses frames whose blocks depend on earlier
  blocks, which is cramjam's default, so we ask for independent blocks. We also leave
  out the content checksum: Java ignores it and it costs a second pass over the data.
"""

from __future__ import annotations

import struct

import cramjam

from odradek.protocol.batch import Compression
from odradek.protocol.errors import CorruptMessage, UnsupportedCompressionType

__all__ = ["DEFAULT_LEVELS", "compress", "compression_type", "decompress"]

Bytes = bytes | bytearray | memoryview

# Kafka's defaults for `compression.<codec>.level` (KIP-390), except lz4: Kafka's 9
# selects lz4's high-compression mode, several times slower than the fast mode that
# librdkafka uses by default and that we keep unless a level is asked for.
DEFAULT_LEVELS: dict[Compression, int | None] = {
    Compression.GZIP: 6,
    Compression.LZ4: None,
    Compression.ZSTD: 3,
}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
# Magic, then version 1 and minimum compatible version 1, as snappy-java writes them.
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
# snappy-java's default block size, so our blocks decode with the same buffers as Java's.
XERIAL_BLOCK_SIZE = 32 * 1024

_BLOCK_LENGTH = struct.Struct(">i")


def compression_type(codec: int) -> Compression:
    """The Compression for a wire id; UnsupportedCompressionType when Kafka defines none."""
    try:
        return Compression(codec)
    except ValueError:
        raise UnsupportedCompressionType(f"unknown compression codec id {codec}") from None


def compress(codec: Compression | int, data: Bytes, level: int | None = None) -> bytes:
    """Compress a records section with `codec`; `level` None means the codec's default.

    NONE returns the data unchanged (as bytes). Snappy has no levels and ignores `level`.
    """
    kind = compression_type(codec)
    if kind is Compression.NONE:
        return bytes(data)
    if level is None:
        level = DEFAULT_LEVELS.get(kind)
    if kind is Compression.GZIP:
        return bytes(cramjam.gzip.compress(data, level=level))
    if kind is Compression.SNAPPY:
        return _xerial_compress(data)
    if kind is Compression.LZ4:
        compressor = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
        # The streaming compressor (the only lz4 API with block options) takes bytes only.
        compressor.compress(data if isinstance(data, bytes) else bytes(data))
        return bytes(compressor.finish())
    return bytes(cramjam.zstd.compress(data, level=level))


def decompress(codec: Compression | int, data: Bytes) -> bytes:
    """Decompress a records section; CorruptMessage when the bytes are not valid `codec`."""
    kind = compression_type(codec)
    if kind is Compression.NONE:
        return bytes(data)
    try:
        if kind is Compression.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if kind is Compression.SNAPPY:
            return _snappy_decompress(data)
        if kind is Compression.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        raise CorruptMessage(f"{kind.name.lower()} records do not decompress: {exc}") from None


def _xerial_compress(data: Bytes) -> bytes:
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE])
        parts.append(_BLOCK_LENGTH.pack(len(block)))
        parts.append(bytes(block))
    return b"".join(parts)


def _snappy_decompress(data: Bytes) -> bytes:
    view = memoryview(data)
    if view[: len(XERIAL_MAGIC)] != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    return _xerial_decompress(view)


def _xerial_decompress(view: memoryview) -> bytes:
    # Version fields are not checked: some writers (older Redpanda) put them
    # little-endian, and the blocks that follow are the same either way.
    end = len(view)
    pos = 0
    parts: list[bytes] = []
    while pos < end:
        # snappy-java reads concatenated streams, each with its own header.
        if view[pos : pos + len(XERIAL_MAGIC)] == XERIAL_MAGIC:
            if end - pos < len(XERIAL_HEADER):
                raise CorruptMessage("snappy records: truncated xerial header")
            pos += len(XERIAL_HEADER)
            continue
        if end - pos < _BLOCK_LENGTH.size:
            raise CorruptMessage("snappy records: truncated xerial block length")
        (length,) = _BLOCK_LENGTH.unpack_from(view, pos)
        pos += _BLOCK_LENGTH.size
        if length < 0 or length > end - pos:
            raise CorruptMessage(f"snappy records: xerial block length {length} out of bounds")
        if length:
            parts.append(bytes(cramjam.snappy.decompress_raw(view[pos : pos + length])))
        pos += length
    return b"".join(parts)
