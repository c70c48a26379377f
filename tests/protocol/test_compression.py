"""Compression codecs in the byte formats Kafka's Java client and librdkafka read and write.

kafka-python's codec module is the foreign implementation here; for snappy, lz4 and zstd
it needs python-snappy, lz4 and zstandard, and those tests skip without them.
"""

import contextlib
import gzip
import io
import struct

import cramjam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec

from odradek.protocol.batch import Compression
from odradek.protocol.compression import (
    XERIAL_BLOCK_SIZE,
    XERIAL_HEADER,
    XERIAL_MAGIC,
    compress,
    decompress,
)
from odradek.protocol.errors import CorruptMessage, UnsupportedCompressionType

CODECS = list(Compression)
COMPRESSED = [c for c in Compression if c is not Compression.NONE]
LZ4_MAGIC = b"\x04\x22\x4d\x18"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

needs_snappy = pytest.mark.skipif(not kafka_codec.has_snappy(), reason="python-snappy missing")
needs_lz4 = pytest.mark.skipif(not kafka_codec.has_lz4(), reason="lz4 missing")
needs_zstd = pytest.mark.skipif(not kafka_codec.has_zstd(), reason="zstandard missing")


def _text(size: int) -> bytes:
    """Compressible but not trivial data, `size` bytes."""
    out = bytearray()
    i = 0
    while len(out) < size:
        out += b'{"device": %d, "temp": %d.%d}\n' % (i % 97, i % 41, i % 10)
        i += 1
    return bytes(out[:size])


@settings(max_examples=60, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=5000))
def test_every_codec_round_trips(codec: Compression, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_codecs_accept_any_buffer(codec: Compression, wrap: type) -> None:
    data = _text(100_000)
    compressed = compress(codec, wrap(data))
    assert isinstance(compressed, bytes)
    assert decompress(codec, wrap(compressed)) == data


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.LZ4, Compression.ZSTD])
@pytest.mark.parametrize("level", [1, 9])
def test_levels_are_honoured_and_round_trip(codec: Compression, level: int) -> None:
    data = _text(50_000)
    assert decompress(codec, compress(codec, data, level=level)) == data


def test_unknown_codec_is_unsupported() -> None:
    for codec_id in (5, 6, 7):
        with pytest.raises(UnsupportedCompressionType):
            compress(codec_id, b"x")
        with pytest.raises(UnsupportedCompressionType):
            decompress(codec_id, b"x")


@pytest.mark.parametrize("codec", COMPRESSED)
def test_garbage_is_corrupt(codec: Compression) -> None:
    for junk in (b"", b"not compressed at all, no", b"\xff" * 40):
        with pytest.raises(CorruptMessage):
            decompress(codec, junk)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_truncated_data_is_corrupt(codec: Compression) -> None:
    compressed = compress(codec, _text(200_000))
    for cut in (1, 7, len(compressed) // 2, len(compressed) - 1):
        with pytest.raises(CorruptMessage):
            decompress(codec, compressed[:cut])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    codec=st.sampled_from(COMPRESSED),
    flips=st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 7)), min_size=1, max_size=4),
    cut=st.none() | st.integers(0, 10**9),
)
def test_damaged_data_decompresses_or_is_corrupt(
    codec: Compression, flips: list[tuple[int, int]], cut: int | None
) -> None:
    damaged = bytearray(compress(codec, _text(70_000)))
    for where, bit in flips:
        damaged[where % len(damaged)] ^= 1 << bit
    if cut is not None:
        damaged = damaged[: cut % len(damaged)]
    # snappy and zstd carry no checksum, so some damage decodes: the batch CRC catches it.
    with contextlib.suppress(CorruptMessage):
        decompress(codec, bytes(damaged))


# ---------------------------------------------------------------------------- gzip


def test_gzip_is_a_standard_stream() -> None:
    data = _text(10_000)
    assert gzip.decompress(compress(Compression.GZIP, data)) == data
    assert kafka_codec.gzip_decode(compress(Compression.GZIP, data)) == data


def test_gzip_reads_concatenated_members_like_java() -> None:
    stream = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(Compression.GZIP, stream) == b"first second"


def test_gzip_reads_kafka_python() -> None:
    data = _text(30_000)
    assert decompress(Compression.GZIP, kafka_codec.gzip_encode(data)) == data


# ---------------------------------------------------------------------------- snappy


def _xerial_blocks(stream: bytes) -> list[bytes]:
    assert stream.startswith(XERIAL_HEADER)
    pos, blocks = len(XERIAL_HEADER), []
    while pos < len(stream):
        (length,) = struct.unpack_from(">i", stream, pos)
        blocks.append(stream[pos + 4 : pos + 4 + length])
        pos += 4 + length
    assert pos == len(stream)
    return blocks


def test_snappy_writes_xerial_framing_like_snappy_java() -> None:
    assert XERIAL_HEADER == b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01"
    data = _text(3 * XERIAL_BLOCK_SIZE + 100)
    blocks = _xerial_blocks(compress(Compression.SNAPPY, data))
    assert len(blocks) == 4
    chunks = [bytes(cramjam.snappy.decompress_raw(block)) for block in blocks]
    assert [len(c) for c in chunks] == [XERIAL_BLOCK_SIZE] * 3 + [100]
    assert b"".join(chunks) == data


def test_snappy_of_nothing_is_the_bare_header() -> None:
    assert compress(Compression.SNAPPY, b"") == XERIAL_HEADER
    assert decompress(Compression.SNAPPY, XERIAL_HEADER) == b""


def test_snappy_reads_raw_snappy_as_librdkafka_writes_it() -> None:
    data = _text(100_000)
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert not raw.startswith(XERIAL_MAGIC)
    assert decompress(Compression.SNAPPY, raw) == data


def test_snappy_reads_concatenated_xerial_streams() -> None:
    stream = compress(Compression.SNAPPY, b"one ") + compress(Compression.SNAPPY, b"two")
    assert decompress(Compression.SNAPPY, stream) == b"one two"


def test_snappy_reads_little_endian_version_fields() -> None:
    # Older Redpanda wrote the version fields little-endian; readers ignore them.
    stream = compress(Compression.SNAPPY, b"payload")
    swapped = XERIAL_MAGIC + struct.pack("<ii", 1, 1) + stream[len(XERIAL_HEADER) :]
    assert decompress(Compression.SNAPPY, swapped) == b"payload"


@pytest.mark.parametrize(
    "stream",
    [
        XERIAL_MAGIC + b"\x00\x00\x00\x01",  # header cut short
        XERIAL_HEADER + b"\x00\x00",  # block length cut short
        XERIAL_HEADER + b"\x00\x00\x01\x00" + b"abc",  # block longer than the stream
        XERIAL_HEADER + b"\xff\xff\xff\xfe" + b"abc",  # negative block length
        XERIAL_HEADER + b"\x00\x00\x00\x03" + b"\xff\xff\xff",  # block is not snappy
    ],
)
def test_snappy_malformed_xerial_is_corrupt(stream: bytes) -> None:
    with pytest.raises(CorruptMessage):
        decompress(Compression.SNAPPY, stream)


@needs_snappy
def test_snappy_xerial_interoperates_with_kafka_python() -> None:
    data = _text(200_000)
    assert kafka_codec.snappy_decode(compress(Compression.SNAPPY, data)) == data
    assert decompress(Compression.SNAPPY, kafka_codec.snappy_encode(data)) == data
    raw = kafka_codec.snappy_encode(data, xerial_compatible=False)
    assert decompress(Compression.SNAPPY, raw) == data


# ---------------------------------------------------------------------------- lz4


def _lz4_frame_flags(frame: bytes) -> int:
    assert frame[:4] == LZ4_MAGIC
    return frame[4]


@pytest.mark.parametrize("size", [0, 10, 200_000])
def test_lz4_frame_has_independent_blocks_and_no_content_checksum(size: int) -> None:
    flg = _lz4_frame_flags(compress(Compression.LZ4, _text(size)))
    assert flg >> 6 == 0b01  # frame format version
    assert flg & 0x20, "block independence bit must be set: Kafka's Java reader needs it"
    assert not flg & 0x04, "no content checksum"


def test_lz4_reads_linked_blocks_and_checksums() -> None:
    data = _text(300_000)
    linked = bytes(cramjam.lz4.compress(data))  # cramjam's default: linked + checksum
    assert not _lz4_frame_flags(linked) & 0x20
    assert decompress(Compression.LZ4, linked) == data


@needs_lz4
def test_lz4_interoperates_with_kafka_python() -> None:
    data = _text(300_000)
    assert kafka_codec.lz4_decode(compress(Compression.LZ4, data)) == data
    theirs = kafka_codec.lz4_encode(data)
    assert _lz4_frame_flags(theirs) & 0x20
    assert decompress(Compression.LZ4, theirs) == data


@needs_lz4
def test_lz4_reads_frames_with_content_size_and_block_checksums() -> None:
    import lz4.frame

    data = _text(150_000)
    frame = lz4.frame.compress(
        data, store_size=True, block_checksum=True, content_checksum=True, block_linked=False
    )
    assert decompress(Compression.LZ4, frame) == data


# ---------------------------------------------------------------------------- zstd


def _zstd_has_content_size(frame: bytes) -> bool:
    assert frame[:4] == ZSTD_MAGIC
    descriptor = frame[4]
    # Frame_Content_Size_flag 0 without Single_Segment_flag: the size is absent.
    return bool(descriptor >> 6) or bool(descriptor & 0x20)


def test_zstd_reads_a_frame_without_content_size() -> None:
    data = _text(500_000)
    streaming = cramjam.zstd.Compressor(level=3)
    streaming.compress(data)
    frame = bytes(streaming.finish())
    assert not _zstd_has_content_size(frame)
    assert decompress(Compression.ZSTD, frame) == data


@needs_zstd
def test_zstd_reads_a_streamed_frame_from_zstandard() -> None:
    import zstandard

    data = _text(500_000)
    out = io.BytesIO()
    with zstandard.ZstdCompressor(level=3).stream_writer(out, closefd=False) as writer:
        writer.write(data)
    frame = out.getvalue()
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(Compression.ZSTD, frame) == data


@needs_zstd
def test_zstd_interoperates_with_kafka_python() -> None:
    data = _text(300_000)
    assert kafka_codec.zstd_decode(compress(Compression.ZSTD, data)) == data
    assert decompress(Compression.ZSTD, kafka_codec.zstd_encode(data)) == data


def test_zstd_reads_concatenated_frames() -> None:
    stream = compress(Compression.ZSTD, b"one ") + compress(Compression.ZSTD, b"two")
    assert decompress(Compression.ZSTD, stream) == b"one two"
