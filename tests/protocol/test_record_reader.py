"""The one record parser: its full and key-only depths agree, with one strictness.

A corrupt key length (below -1) used to be a null key to the cleaner and corruption
to everything else; now every reader of records calls it corrupt.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from batch_bytes import raw_batch, record_bytes, restamp, zigzag
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.batch import HEADER, Compression, read_header
from odradek.protocol.errors import CorruptMessage, UnsupportedCompressionType
from odradek.protocol.record_reader import record_keys, record_stamps
from odradek.protocol.records import NewRecord, decode_batch, encode_batch
from tests.lifecycle.helpers import Clock, clean_once, compact_config, keyed_batch, open_log

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

records_lists = st.lists(
    st.builds(
        NewRecord,
        key=st.none() | st.binary(max_size=200),  # two-byte length varints too
        value=st.none() | st.binary(max_size=300),
        headers=st.lists(
            st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=10)), max_size=2
        ),
        timestamp=st.integers(0, 1 << 42),
        offset_delta=st.none(),
    ),
    min_size=1,
    max_size=20,
)


def _keys_of(batch: bytes) -> list[tuple[int, bytes | None, bool]]:
    h = read_header(batch)
    return record_keys(memoryview(batch), h.base_offset, h.attributes, h.records_count)


@FAST
@given(
    records=records_lists,
    codec=st.sampled_from(list(Compression)),
    base_offset=st.integers(0, 1 << 40),
)
def test_full_and_key_only_parse_round_trip_and_agree(
    records: list[NewRecord], codec: Compression, base_offset: int
) -> None:
    batch = encode_batch(records, base_offset=base_offset, compression=codec)
    decoded = decode_batch(batch).records
    assert [(r.key, r.value, r.headers, r.timestamp) for r in decoded] == [
        (r.key, r.value, tuple(r.headers), r.timestamp) for r in records
    ]
    assert [r.offset for r in decoded] == list(range(base_offset, base_offset + len(records)))
    assert _keys_of(batch) == [(r.offset, r.key, r.value is not None) for r in decoded]
    h = read_header(batch)
    assert record_stamps(memoryview(batch), h.base_offset, h.base_timestamp, h.attributes,
                         h.records_count) == [
        (r.offset, r.timestamp, r.key is not None) for r in decoded]


@settings(max_examples=400, deadline=None)
@given(
    records=records_lists,
    flips=st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 7)), min_size=1, max_size=3),
)
def test_the_key_only_parse_is_never_more_lenient_about_what_it_reads(
    records: list[NewRecord], flips: list[tuple[int, int]]
) -> None:
    """Damage under a valid CRC: whatever the full parse accepts, the key-only parse
    reads the same; whatever the key-only parse refuses, the full parse refuses."""
    buf = bytearray(encode_batch(records))
    for where, bit in flips:
        buf[HEADER.size + where % (len(buf) - HEADER.size)] ^= 1 << bit
    damaged = restamp(buf)
    try:
        keys = _keys_of(damaged)
    except (CorruptMessage, UnsupportedCompressionType):
        with pytest.raises((CorruptMessage, UnsupportedCompressionType)):
            decode_batch(damaged)
        return
    with contextlib.suppress(CorruptMessage, UnsupportedCompressionType):
        decoded = decode_batch(damaged).records
        assert keys == [(r.offset, r.key, r.value is not None) for r in decoded]


# attributes, timestampDelta, offsetDelta, then keyLength -2 with one byte after it
KEY_LENGTH_MINUS_2 = raw_batch(record_bytes(
    b"\x00", zigzag(0), zigzag(0), zigzag(-2), b"k", zigzag(1), b"v", zigzag(0)
), 1)
VALUE_LENGTH_MINUS_2 = raw_batch(record_bytes(
    b"\x00", zigzag(0), zigzag(0), zigzag(1), b"k", zigzag(-2), zigzag(0)
), 1)


@pytest.mark.parametrize("batch", [KEY_LENGTH_MINUS_2, VALUE_LENGTH_MINUS_2])
def test_a_length_below_minus_one_is_corrupt_to_every_reader(batch: bytes) -> None:
    with pytest.raises(CorruptMessage, match=r"negative (key|value) length -2"):
        decode_batch(batch)
    with pytest.raises(CorruptMessage, match=r"negative (key|value) length -2"):
        _keys_of(batch)


def test_a_compacted_topic_refuses_a_key_length_of_minus_two(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, compact_config(), clock)
    with pytest.raises(CorruptMessage, match="negative key length -2"):
        lg.append_as_leader(bytearray(KEY_LENGTH_MINUS_2), 0)
    assert lg.log_end_offset == 0
    lg.close()


def test_the_cleaner_and_a_fetch_both_call_a_key_length_of_minus_two_corrupt(
    tmp_path: Path,
) -> None:
    """A replica takes batches as they are, so the corrupt record reaches the log;
    the consumer's view of the fetched bytes and the cleaner then agree it is corrupt
    (the cleaner used to read it as a null key and drop or keep it silently)."""
    clock = Clock()
    lg = open_log(tmp_path, compact_config(), clock)
    lg.append_as_follower(bytearray(KEY_LENGTH_MINUS_2))
    for i in range(1, 40):  # enough to roll past the bad batch's segment
        lg.append_as_follower(keyed_batch([(b"k", b"v%d" % i)], base_offset=i))
    lg.high_watermark = lg.log_end_offset
    fetched = lg.read(0, 1 << 20).records
    with pytest.raises(CorruptMessage, match="negative key length -2"):
        decode_batch(fetched)
    with pytest.raises(CorruptMessage, match="negative key length -2"):
        clean_once(lg, clock)
    lg.close()
