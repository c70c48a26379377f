"""The v2 record codec: round trips, kafka-python as the foreign peer, malformed input."""

import contextlib
import dataclasses
import functools
import struct
import time
from collections.abc import Sequence

import pytest
from batch_bytes import raw_batch as _raw_batch
from batch_bytes import record_bytes as _record
from batch_bytes import restamp as _restamp
from batch_bytes import zigzag as _zigzag
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from odradek.protocol import batch as batch_header
from odradek.protocol.batch import Compression, TimestampType, crc_is_valid, read_header
from odradek.protocol.errors import CorruptMessage, UnsupportedCompressionType
from odradek.protocol.records import (
    ControlType,
    NewRecord,
    Record,
    decode_batch,
    decode_batches,
    encode_batch,
    encode_control_batch,
    encode_empty_batch,
    read_control_record,
    recompress,
)

CODECS = list(Compression)
# The codecs kafka-python can use here: snappy, lz4 and zstd need optional packages.
_AVAILABLE = {
    Compression.NONE: True,
    Compression.GZIP: kafka_codec.has_gzip(),
    Compression.SNAPPY: kafka_codec.has_snappy(),
    Compression.LZ4: kafka_codec.has_lz4(),
    Compression.ZSTD: kafka_codec.has_zstd(),
}
PEER_CODECS = [codec for codec, ok in _AVAILABLE.items() if ok]
SLOW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@functools.cache
def _big(size: int) -> bytes:
    """Compressible bytes: numbered sensor readings."""
    return b"".join(b"%d,sensor-reading;" % i for i in range(size // 10 + 1))[:size]


payloads = st.one_of(
    st.none(),
    st.binary(max_size=40),
    st.binary(min_size=64, max_size=300),
    st.sampled_from([70_000, 140_000]).map(_big),  # crosses lz4 and xerial block sizes
)
header_lists = st.lists(
    st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=20)), max_size=3
).map(tuple)
timestamps = st.one_of(st.integers(0, 2**45), st.integers(-(2**61), 2**61))
new_records = st.builds(
    NewRecord, key=payloads, value=payloads, headers=header_lists, timestamp=timestamps
)
record_lists = st.lists(new_records, min_size=1, max_size=12)


def _expected(records: Sequence[NewRecord], base_offset: int) -> list[Record]:
    offsets = []
    delta = -1
    for record in records:
        delta = delta + 1 if record.offset_delta is None else record.offset_delta
        offsets.append(base_offset + delta)
    return [
        Record(offset, r.timestamp or 0, r.key, r.value, tuple(r.headers))
        for offset, r in zip(offsets, records, strict=True)
    ]


def _kafka_python_batch(
    records: Sequence[NewRecord], codec: Compression, *, transactional: bool = False
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=int(codec), is_transactional=transactional,
        producer_id=1000 if transactional else -1, producer_epoch=3 if transactional else -1,
        base_sequence=0 if transactional else -1, batch_size=2**31 - 1,
    )  # fmt: skip
    for offset, record in enumerate(records):
        builder.append(offset, record.timestamp, record.key, record.value, list(record.headers))
    return bytes(builder.build())


def _as_kafka_python_reads(buf: bytes) -> list[tuple[object, ...]]:
    peer = DefaultRecordBatch(buf)
    assert peer.validate_crc()
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in peer]


def _fields(records: Sequence[Record]) -> list[tuple[object, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


# ---------------------------------------------------------------------------- round trips


@SLOW
@given(
    records=record_lists,
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 2**62),
    leader_epoch=st.integers(-1, 2**31 - 1),
)
def test_batches_round_trip_with_every_codec(
    records: list[NewRecord], codec: Compression, base_offset: int, leader_epoch: int
) -> None:
    buf = encode_batch(
        records, base_offset=base_offset, compression=codec, partition_leader_epoch=leader_epoch
    )
    decoded = decode_batch(buf)
    assert decoded.records == _expected(records, base_offset)
    header = decoded.header
    assert crc_is_valid(buf, header)
    assert header.size == len(buf)
    assert header.compression is codec
    assert header.records_count == len(records)
    assert header.last_offset_delta == len(records) - 1
    assert header.base_timestamp == records[0].timestamp
    assert header.max_timestamp == max(r.timestamp or 0 for r in records)
    assert header.partition_leader_epoch == leader_epoch
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, -1)
    assert not decoded.is_transactional and not decoded.is_control


@pytest.mark.parametrize("codec", CODECS)
def test_producer_fields_and_flags_round_trip(codec: Compression) -> None:
    buf = encode_batch(
        [NewRecord(b"k", b"v", timestamp=5)], base_offset=9, compression=codec,
        producer_id=77, producer_epoch=4, base_sequence=120, transactional=True,
    )  # fmt: skip
    header = decode_batch(buf).header
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 4, 120)
    assert header.is_transactional and not header.is_control
    assert header.last_sequence == 120


def test_inputs_may_be_tuples_and_timestamps_default_to_now() -> None:
    before = time.time_ns() // 1_000_000
    buf = encode_batch([(b"k", b"v", [("h", b"x")], None), (None, None, (), 17)])
    after = time.time_ns() // 1_000_000
    first, second = decode_batch(buf).records
    assert before <= first.timestamp <= after
    assert (first.key, first.value, first.headers) == (b"k", b"v", (("h", b"x"),))
    assert (second.offset, second.timestamp, second.key, second.value) == (1, 17, None, None)


def test_log_append_time_gives_every_record_the_batch_time() -> None:
    records = [NewRecord(b"a", b"1", timestamp=10), NewRecord(b"b", b"2", timestamp=20)]
    buf = encode_batch(
        records, timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=99_000
    )
    decoded = decode_batch(buf)
    assert decoded.header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert decoded.header.max_timestamp == 99_000
    assert [r.timestamp for r in decoded] == [99_000, 99_000]
    assert [t for _, t, *_ in _as_kafka_python_reads(buf)] == [99_000, 99_000]


def test_decodes_from_any_buffer_and_position() -> None:
    one = encode_batch([NewRecord(b"k", b"v", timestamp=1)])
    two = encode_batch([NewRecord(b"x", None, timestamp=2)], base_offset=1)
    joined = one + two
    for buf in (joined, bytearray(joined), memoryview(joined)):
        assert decode_batch(buf, len(one)).records == [Record(1, 2, b"x", None)]


def test_decode_batches_walks_a_buffer_and_stops_at_a_partial_tail() -> None:
    batches = [
        encode_batch([NewRecord(b"%d" % i, b"v", timestamp=i)] * 3, base_offset=3 * i)
        for i in range(4)
    ]
    buf = b"".join(batches) + batches[0][:40]
    decoded = list(decode_batches(buf))
    assert [r.offset for b in decoded for r in b] == list(range(12))


# ---------------------------------------------------------------------------- offsets


def test_explicit_offset_deltas_keep_gaps_and_last_offset_delta() -> None:
    records = [
        NewRecord(b"a", b"1", timestamp=1, offset_delta=0),
        NewRecord(b"b", b"2", timestamp=2, offset_delta=3),
        NewRecord(b"c", b"3", timestamp=3),  # previous + 1
    ]
    buf = encode_batch(records, base_offset=100, last_offset_delta=9)
    decoded = decode_batch(buf)
    assert [r.offset for r in decoded] == [100, 103, 104]
    assert decoded.header.last_offset_delta == 9
    assert decoded.last_offset == 109
    assert [r[0] for r in _as_kafka_python_reads(buf)] == [100, 103, 104]


def test_cleaner_rewrite_keeps_offsets_and_the_batch_range() -> None:
    original = decode_batch(
        encode_batch(
            [NewRecord(b"k%d" % (i % 3), b"v%d" % i, timestamp=1000 + i) for i in range(10)],
            base_offset=500,
            producer_id=8,
            producer_epoch=1,
            base_sequence=40,
        )
    )
    kept = [r for r in original if r.offset % 3 == 1 and r.offset < 508]
    h = original.header
    rewritten = decode_batch(
        encode_batch(
            kept,
            base_offset=h.base_offset,
            last_offset_delta=h.last_offset_delta,
            producer_id=h.producer_id,
            producer_epoch=h.producer_epoch,
            base_sequence=h.base_sequence,
            delete_horizon_ms=50_000,
        )
    )
    assert rewritten.records == kept
    assert rewritten.header.last_offset == h.last_offset
    assert rewritten.header.last_sequence == h.last_sequence
    assert rewritten.header.attributes & batch_header.ATTR_DELETE_HORIZON
    assert rewritten.header.base_timestamp == 50_000
    assert rewritten.header.max_timestamp == max(r.timestamp for r in kept)


def test_empty_batch_keeps_producer_state_and_range() -> None:
    buf = encode_empty_batch(
        base_offset=40, last_offset_delta=4, max_timestamp=777, producer_id=5,
        producer_epoch=2, base_sequence=10, transactional=True,
    )  # fmt: skip
    decoded = decode_batch(buf)
    assert decoded.records == []
    h = decoded.header
    assert (h.records_count, h.last_offset, h.max_timestamp, h.last_sequence) == (0, 44, 777, 14)
    assert h.is_transactional
    assert _as_kafka_python_reads(buf) == []


@pytest.mark.parametrize(
    ("records", "options"),
    [
        ([], {}),
        ([NewRecord(offset_delta=2), NewRecord(offset_delta=2)], {}),
        ([NewRecord(offset_delta=-1)], {}),
        ([NewRecord(offset_delta=2**31)], {}),
        ([NewRecord(offset_delta=5)], {"last_offset_delta": 4}),
        ([NewRecord(timestamp=1)], {"log_append_time": 5}),
        ([NewRecord(timestamp=1)], {"producer_epoch": 2**15}),
        ([NewRecord(timestamp=-(2**63)), NewRecord(timestamp=2**63 - 1)], {}),
    ],
)
def test_encode_rejects_what_the_wire_cannot_say(
    records: list[NewRecord], options: dict[str, int]
) -> None:
    with pytest.raises(ValueError):
        encode_batch(records, **options)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- kafka-python


@SLOW
@given(records=record_lists, codec=st.sampled_from(PEER_CODECS))
def test_we_decode_what_kafka_python_encodes(records: list[NewRecord], codec: Compression) -> None:
    buf = _kafka_python_batch(records, codec)
    decoded = decode_batch(buf)
    assert _fields(decoded.records) == _as_kafka_python_reads(buf)
    assert decoded.records == _expected(records, 0)
    assert decoded.header.compression in (codec, Compression.NONE)  # it skips useless compression


@SLOW
@given(records=record_lists, codec=st.sampled_from(PEER_CODECS))
def test_kafka_python_decodes_what_we_encode(records: list[NewRecord], codec: Compression) -> None:
    buf = encode_batch(records, base_offset=0, compression=codec)
    assert _as_kafka_python_reads(buf) == _fields(_expected(records, 0))
    peer = DefaultRecordBatch(buf)
    assert peer.compression_type == codec
    assert peer.last_offset_delta == len(records) - 1
    assert peer.max_timestamp == max(r.timestamp or 0 for r in records)
    assert peer.first_timestamp == records[0].timestamp


@pytest.mark.parametrize("codec", PEER_CODECS)
def test_compressed_batches_interoperate_with_kafka_python(codec: Compression) -> None:
    # Compressible values, so kafka-python keeps its compression instead of falling back.
    records = [
        NewRecord(b"device-%d" % (i % 7), _big(2000), (("trace", b"%d" % i),), 1_700_000 + i)
        for i in range(200)
    ]
    theirs = _kafka_python_batch(records, codec, transactional=True)
    assert read_header(theirs).compression is codec
    assert decode_batch(theirs).records == _expected(records, 0)
    ours = encode_batch(records, compression=codec)
    assert _as_kafka_python_reads(ours) == _fields(_expected(records, 0))


def test_kafka_python_memory_records_interoperate() -> None:
    builder = MemoryRecordsBuilder(magic=2, compression_type=1, batch_size=2**20, offset=0)
    for i in range(50):
        builder.append(1000 + i, b"k", b"value %d" % i, [("h", None)])
    builder.close()
    theirs = bytes(builder.buffer())
    assert [r.value for b in decode_batches(theirs) for r in b] == [
        b"value %d" % i for i in range(50)
    ]
    ours = b"".join(
        encode_batch([NewRecord(b"k", b"%d" % i, timestamp=i)], base_offset=i) for i in range(3)
    )
    peer = MemoryRecords(ours)
    assert [r.value for b in peer for r in b] == [b"0", b"1", b"2"]


# ---------------------------------------------------------------------------- control


@pytest.mark.parametrize("commit", [True, False])
def test_control_batch_round_trips(commit: bool) -> None:
    buf = encode_control_batch(
        commit=commit, producer_id=4242, producer_epoch=7, coordinator_epoch=13,
        base_offset=300, timestamp=123_456, partition_leader_epoch=2,
    )  # fmt: skip
    decoded = decode_batch(buf)
    h = decoded.header
    assert h.is_control and h.is_transactional
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (4242, 7, -1)
    assert (h.base_offset, h.records_count, h.partition_leader_epoch) == (300, 1, 2)
    (record,) = decoded.records
    assert record.timestamp == 123_456
    expected = ControlType.COMMIT if commit else ControlType.ABORT
    assert read_control_record(record) == (expected, 13)
    (peer_record,) = list(DefaultRecordBatch(buf))
    assert peer_record.commit is commit and peer_record.version == 0


def test_control_records_of_later_versions_read_by_their_prefix() -> None:
    record = Record(0, 0, struct.pack(">hh", 1, 1), struct.pack(">hi", 1, 9) + b"more")
    assert read_control_record(record) == (ControlType.COMMIT, 9)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (None, struct.pack(">hi", 0, 1)),
        (b"\x00\x00\x00", struct.pack(">hi", 0, 1)),
        (struct.pack(">hh", -1, 1), struct.pack(">hi", 0, 1)),
        (struct.pack(">hh", 0, 5), struct.pack(">hi", 0, 1)),  # not a transaction marker
        (struct.pack(">hh", 0, 0), None),
        (struct.pack(">hh", 0, 0), b"\x00\x00\x00"),
        (struct.pack(">hh", 0, 0), struct.pack(">hi", -3, 1)),
    ],
)
def test_malformed_control_records_are_corrupt(key: bytes | None, value: bytes | None) -> None:
    with pytest.raises(CorruptMessage):
        read_control_record(Record(0, 0, key, value))


# ---------------------------------------------------------------------------- recompress


@SLOW
@given(
    records=record_lists,
    source=st.sampled_from(CODECS),
    target=st.sampled_from(CODECS),
    log_append=st.booleans(),
)
def test_recompress_keeps_every_field_but_the_codec(
    records: list[NewRecord], source: Compression, target: Compression, log_append: bool
) -> None:
    buf = encode_batch(
        records, base_offset=71, compression=source, producer_id=3, producer_epoch=1,
        base_sequence=5, transactional=True, partition_leader_epoch=6, last_offset_delta=40,
        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
        log_append_time=555 if log_append else None, delete_horizon_ms=None if log_append else 9,
    )  # fmt: skip
    before = decode_batch(buf)
    out = recompress(buf, target)
    after = decode_batch(out)
    assert after.records == before.records
    assert after.header.compression is target
    assert crc_is_valid(out, after.header)
    mask = ~batch_header.ATTR_COMPRESSION_MASK
    assert after.header.attributes & mask == before.header.attributes & mask
    unchanged = {"crc": 0, "batch_length": 0, "attributes": 0}
    assert dataclasses.replace(after.header, **unchanged) == dataclasses.replace(
        before.header, **unchanged
    )
    if source is target:
        assert out == buf


def test_recompress_refuses_a_corrupt_batch() -> None:
    buf = bytearray(encode_batch([NewRecord(b"k", b"v", timestamp=1)]))
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptMessage):
        recompress(buf, Compression.ZSTD)
    with pytest.raises(UnsupportedCompressionType):
        recompress(encode_batch([NewRecord(timestamp=1)]), 6)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- malformed


GOOD = _record(b"\x00", _zigzag(0), _zigzag(0), _zigzag(1), b"k", _zigzag(1), b"v", _zigzag(0))


@pytest.mark.parametrize(
    ("body", "count"),
    [
        (GOOD, 2),  # fewer records than counted
        (GOOD + GOOD, 1),  # bytes left over
        (GOOD, -1),
        (GOOD[:-1], 1),  # record cut short
        (_zigzag(200) + GOOD[1:], 1),  # record length past the section
        (_zigzag(len(GOOD) + 1) + GOOD[1:] + b"\x00", 1),  # length longer than the fields
        (_record(b"\x00", _zigzag(0), _zigzag(0), _zigzag(-2), _zigzag(0), _zigzag(0)), 1),
        (_record(b"\x00", _zigzag(0), _zigzag(0), _zigzag(0), _zigzag(-7), _zigzag(0)), 1),
        (_record(b"\x00", _zigzag(0), b"\xff" * 5 + b"\x01", b"\x00\x00\x00"), 1),  # 6-byte varint
        (_record(b"\x00", b"\xff" * 10 + b"\x01", _zigzag(0), b"\x00\x00\x00"), 1),  # 11-byte
        (_record(b"\x00", _zigzag(0), _zigzag(0), _zigzag(-1), _zigzag(-1), _zigzag(-1)), 1),
        (_record(b"\x00", _zigzag(0), _zigzag(0), _zigzag(-1), _zigzag(-1), _zigzag(1000)), 1),
        (
            _record(
                b"\x00",
                _zigzag(0),
                _zigzag(0),
                _zigzag(-1),
                _zigzag(-1),
                _zigzag(1),
                _zigzag(2),
                b"\xff\xfe",
                _zigzag(-1),
            ),
            1,
        ),  # header key is not utf-8
        (
            _record(
                b"\x00",
                _zigzag(0),
                _zigzag(0),
                _zigzag(-1),
                _zigzag(-1),
                _zigzag(1),
                _zigzag(-1),
                _zigzag(-1),
            ),
            1,
        ),  # null header key
    ],
)
def test_malformed_records_are_corrupt(body: bytes, count: int) -> None:
    with pytest.raises(CorruptMessage):
        decode_batch(_raw_batch(body, count))


def test_hand_built_batch_decodes() -> None:
    assert decode_batch(_raw_batch(GOOD, 1)).records == [Record(0, 0, b"k", b"v")]


def test_unknown_compression_id_is_unsupported() -> None:
    with pytest.raises(UnsupportedCompressionType):
        decode_batch(_raw_batch(GOOD, 1, attributes=6))


def test_compressed_batch_with_no_records_and_no_bytes_is_empty_like_java() -> None:
    assert decode_batch(_raw_batch(b"", 0, attributes=int(Compression.GZIP))).records == []


def test_crc_mismatch_is_corrupt_unless_unchecked() -> None:
    buf = bytearray(encode_batch([NewRecord(b"k", b"value", timestamp=1)]))
    buf[-2] ^= 0x01
    with pytest.raises(CorruptMessage, match="CRC"):
        decode_batch(buf)
    assert decode_batch(buf, verify_crc=False).records[0].value == b"valud"


@pytest.mark.parametrize("codec", CODECS)
def test_every_truncation_is_corrupt(codec: Compression) -> None:
    buf = encode_batch(
        [NewRecord(b"k%d" % i, b"value %d" % i, (("h", b"x"),), i) for i in range(5)],
        compression=codec,
    )
    for cut in range(len(buf)):
        with pytest.raises(CorruptMessage):
            decode_batch(buf[:cut])


_SAMPLE = [NewRecord(b"k%d" % i, _big(50 + 40 * i), ((f"h{i}", b"v"),), i) for i in range(6)]
_SAMPLES = {codec: encode_batch(_SAMPLE, compression=codec) for codec in CODECS}
# Outside the CRC: baseOffset and partitionLeaderEpoch, patched in place by the broker.
_UNCOVERED = set(range(0, 8)) | set(range(12, 16))


@settings(max_examples=300, deadline=None)
@given(codec=st.sampled_from(CODECS), where=st.integers(0, 10**9), bit=st.integers(0, 7))
def test_a_flipped_bit_under_the_crc_is_corrupt(codec: Compression, where: int, bit: int) -> None:
    buf = bytearray(_SAMPLES[codec])
    where %= len(buf)
    buf[where] ^= 1 << bit
    if where in _UNCOVERED:
        assert len(decode_batch(buf).records) == len(_SAMPLE)
    else:
        with pytest.raises(CorruptMessage):
            decode_batch(buf)


@settings(max_examples=500, deadline=None)
@given(
    codec=st.sampled_from(CODECS),
    flips=st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 7)), min_size=1, max_size=3),
    verify_crc=st.booleans(),
)
def test_damage_behind_a_valid_crc_decodes_or_is_corrupt(
    codec: Compression, flips: list[tuple[int, int]], verify_crc: bool
) -> None:
    # The CRC is recomputed after the damage, so the record parser itself is on trial.
    buf = bytearray(_SAMPLES[codec])
    for where, bit in flips:
        buf[21 + where % (len(buf) - 21)] ^= 1 << bit
    damaged = _restamp(buf)
    with contextlib.suppress(CorruptMessage, UnsupportedCompressionType):
        decode_batch(damaged, verify_crc=verify_crc)
