"""One partition: appends, reads, rolls, timestamps, idempotence, truncation."""

from __future__ import annotations

import itertools
import os
import struct
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecords
from storage_helpers import (
    BASE_TS,
    Clock,
    base_offsets,
    idempotent_batch,
    make_batch,
    set_attribute_bits,
)

from odradek.protocol.batch import (
    ATTR_CONTROL,
    Compression,
    TimestampType,
    crc_is_valid,
    iter_headers,
    read_header,
)
from odradek.protocol.errors import (
    CorruptMessage,
    InvalidProducerEpoch,
    InvalidRecord,
    KafkaError,
    MessageTooLarge,
    OffsetOutOfRange,
    OutOfOrderSequence,
    RecordListTooLarge,
    RecordValidation,
)
from odradek.storage.index import parse_offset_index, parse_time_index
from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig
from odradek.storage.validator import UnexpectedAppendOffset

OpenLog = Callable[..., Log]


def records_of(data: bytes) -> list[tuple[int, int, bytes | None]]:
    """(offset, timestamp, value) of every record, decoded by kafka-python."""
    out = []
    records = MemoryRecords(bytes(data))
    while records.has_next():
        batch = records.next_batch()
        for record in batch:
            out.append((record.offset, record.timestamp, record.value))
    return out


def test_files_are_named_by_twenty_digit_base_offset(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"a", b"b"]), 0)
    log.roll()
    log.append_as_leader(make_batch([b"c"]), 0)
    names = sorted(os.listdir(tmp_path / "topic-0"))
    assert names == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "00000000000000000002.index",
        "00000000000000000002.log",
        "00000000000000000002.snapshot",
        "00000000000000000002.timeindex",
        "leader-epoch-checkpoint",
    ]
    assert (log.topic, log.partition) == ("topic", 0)


def test_topic_names_with_dashes_and_dots(open_log: OpenLog) -> None:
    log = open_log(name="my-topic.v2-17")
    assert (log.topic, log.partition) == ("my-topic.v2", 17)


def test_append_assigns_offsets_in_place_and_reads_back(open_log: OpenLog) -> None:
    log = open_log()
    first = log.append_as_leader(make_batch([b"a", b"b", b"c"]), leader_epoch=4)
    second = log.append_as_leader(make_batch([b"d"]), leader_epoch=4)
    assert (first.first_offset, first.last_offset, first.records_count) == (0, 2, 3)
    assert (second.first_offset, second.last_offset) == (3, 3)
    assert log.log_end_offset == 4
    result = log.read(0, 1 << 20)
    assert [o for o, _, _ in records_of(result.records)] == [0, 1, 2, 3]
    assert [v for _, _, v in records_of(result.records)] == [b"a", b"b", b"c", b"d"]
    for pos, header in iter_headers(result.records):
        assert header.partition_leader_epoch == 4
        assert crc_is_valid(result.records[pos : pos + header.size], header)
    assert log.leader_epochs.entries == [(4, 0)]


def test_several_batches_in_one_append(open_log: OpenLog) -> None:
    log = open_log()
    info = log.append_as_leader(make_batch([b"a", b"b"]) + make_batch([b"c"]), 0)
    assert (info.first_offset, info.last_offset, info.records_count) == (0, 2, 3)
    assert base_offsets(log.read(0, 1 << 20).records) == [0, 2]


def test_read_at_log_end_is_empty_outside_is_out_of_range(open_log: OpenLog) -> None:
    log = open_log()
    for _ in range(3):
        log.append_as_leader(make_batch(), 0)
    assert log.read(3, 1000).records == b""
    with pytest.raises(OffsetOutOfRange):
        log.read(4, 1000)
    log.increment_log_start_offset(2)
    with pytest.raises(OffsetOutOfRange):
        log.read(1, 1000)
    assert base_offsets(log.read(2, 1000).records) == [2]


def test_read_from_the_middle_of_a_batch_returns_the_whole_batch(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"a", b"b", b"c"]), 0)
    log.append_as_leader(make_batch([b"d"]), 0)
    result = log.read(1, 1 << 20)
    assert base_offsets(result.records) == [0, 3]
    assert result.first_offset == 0


def test_index_is_sparse_by_index_interval_bytes(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(LogConfig(index_interval_bytes=1000))
    size = len(make_batch([b"x" * 100]))
    for _ in range(200):
        log.append_as_leader(make_batch([b"x" * 100]), 0)
    log.close()
    raw = (tmp_path / "topic-0" / "00000000000000000000.index").read_bytes()
    entries = parse_offset_index(raw, 0)
    per_entry = 1000 // size + 1  # an entry once more than 1000 bytes went unindexed
    assert len(entries) == (200 - 1) // per_entry
    gaps = [b.position - a.position for a, b in itertools.pairwise(entries)]
    assert set(gaps) == {per_entry * size}
    for entry in entries:  # each entry is a batch's last offset at that batch's start
        assert entry.position == entry.offset * size


def test_roll_on_segment_bytes(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=1000))
    size = len(make_batch([b"y" * 150]))
    for _ in range(20):
        log.append_as_leader(make_batch([b"y" * 150]), 0)
    per_segment = 1000 // size
    assert [s.size for s in log.segments[:-1]] == [per_segment * size] * (len(log.segments) - 1)
    assert [s.base_offset for s in log.segments] == list(range(0, 20, per_segment))
    assert base_offsets(log.read(0, 1 << 20, min_one_batch=True).records)[0] == 0


def test_roll_on_segment_ms_counts_from_the_first_batch_timestamp(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_ms=1000))
    log.append_as_leader(make_batch(timestamps=[BASE_TS]), 0)
    log.append_as_leader(make_batch(timestamps=[BASE_TS + 1000]), 0)
    assert len(log.segments) == 1
    log.append_as_leader(make_batch(timestamps=[BASE_TS + 1001]), 0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_on_segment_ms_by_wall_clock_without_timestamps(
    open_log: OpenLog, clock: Clock
) -> None:
    log = open_log(LogConfig(segment_ms=1000, message_timestamp_type="CreateTime"))
    log.append_as_leader(make_batch(timestamps=[-1]), 0)
    clock.now += 1000
    log.append_as_leader(make_batch(timestamps=[-1]), 0)
    assert len(log.segments) == 1
    clock.now += 1
    log.append_as_leader(make_batch(timestamps=[-1]), 0)
    assert len(log.segments) == 2


def test_rolled_segment_time_index_ends_with_its_max(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(LogConfig(index_interval_bytes=1 << 20))
    for ts in (BASE_TS + 5, BASE_TS + 50, BASE_TS + 7):
        log.append_as_leader(make_batch(timestamps=[ts]), 0)
    log.roll()
    raw = (tmp_path / "topic-0" / "00000000000000000000.timeindex").read_bytes()
    assert parse_time_index(raw, 0) == [(BASE_TS + 50, 1)]


def test_roll_when_the_index_is_full(open_log: OpenLog) -> None:
    # 48 bytes: 6 offset entries, 4 time entries of which the last is kept for the roll.
    log = open_log(LogConfig(index_interval_bytes=1, segment_index_bytes=48))
    for i in range(20):
        log.append_as_leader(make_batch(timestamps=[BASE_TS + i]), 0)
    assert [s.base_offset for s in log.segments] == [0, 4, 8, 12, 16]
    for seg in log.segments[:-1]:
        assert (seg.offset_index.entries, seg.time_index.entries) == (3, 3)


def test_reading_the_middle_of_20000_batches_costs_as_much_as_the_start(
    open_log: OpenLog,
) -> None:
    log = open_log()
    template = make_batch([b"m"])
    for _ in range(20_000):
        log.append_as_leader(bytearray(template), 0)
    assert len(log.segments) == 1
    segment = log.segments[0]
    costs = {}
    for offset in (0, 10_000, 19_999, 13_337):
        segment.bytes_scanned = 0
        result = log.read(offset, 500)
        assert base_offsets(result.records)[0] == offset
        costs[offset] = segment.bytes_scanned
    # One header read near the start, one near the index entry below the target:
    # bounded by the index interval, not by the distance from the segment start.
    assert max(costs.values()) <= 2 * 16 * 1024
    assert costs[10_000] <= 2 * costs[0] + 8192


def test_max_bytes_returns_whole_batches_and_min_one_batch(open_log: OpenLog) -> None:
    log = open_log()
    size = len(make_batch([b"z" * 100]))
    for _ in range(5):
        log.append_as_leader(make_batch([b"z" * 100]), 0)
    assert len(log.read(0, 2 * size + size // 2).records) == 2 * size
    assert len(log.read(0, size // 2).records) == size  # KIP-74: one batch at least
    assert log.read(0, size // 2, min_one_batch=False).records == b""
    assert len(log.read(0, 10 * size).records) == 5 * size


def test_max_offset_bounds_reads(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=400))
    for _ in range(12):
        log.append_as_leader(make_batch([b"q" * 40]), 0)
    assert len(log.segments) > 2
    for hw in range(0, 13):
        for start in range(0, hw + 1):
            got = base_offsets(log.read(start, 1 << 20, max_offset=hw).records)
            assert all(o < hw for o in got)
            if start < hw:
                assert got and got[0] == start
            else:
                assert got == []


def test_offset_for_timestamp_finds_the_first_record_at_or_after(open_log: OpenLog) -> None:
    log = open_log(LogConfig(index_interval_bytes=100))
    for i in range(50):
        ts = [BASE_TS + i * 100 + j * 10 for j in range(3)]
        log.append_as_leader(make_batch([b"r"] * 3, timestamps=ts), leader_epoch=2)
    assert log.offset_for_timestamp(BASE_TS) == (0, BASE_TS, 2)
    assert log.offset_for_timestamp(BASE_TS + 1015) == (32, BASE_TS + 1020, 2)
    assert log.offset_for_timestamp(BASE_TS + 1020) == (32, BASE_TS + 1020, 2)
    assert log.offset_for_timestamp(BASE_TS + 1010) == (31, BASE_TS + 1010, 2)
    assert log.offset_for_timestamp(BASE_TS + 1021) == (33, BASE_TS + 1100, 2)
    assert log.offset_for_timestamp(BASE_TS - 10**6) == (0, BASE_TS, 2)
    assert log.offset_for_timestamp(BASE_TS + 10**6) is None


def test_offset_for_timestamp_with_out_of_order_timestamps(open_log: OpenLog) -> None:
    log = open_log(LogConfig(index_interval_bytes=1))
    for ts in (100, 300, 200, 400, 250):
        log.append_as_leader(make_batch(timestamps=[BASE_TS + ts]), 0)
    assert log.offset_for_timestamp(BASE_TS + 250)[:2] == (1, BASE_TS + 300)  # type: ignore[index]
    assert log.offset_for_timestamp(BASE_TS + 350)[:2] == (3, BASE_TS + 400)  # type: ignore[index]


def test_offset_for_timestamp_inside_a_compressed_batch(open_log: OpenLog) -> None:
    log = open_log()
    ts = [BASE_TS + j for j in range(0, 100, 10)]
    log.append_as_leader(make_batch([b"c" * 20] * 10, timestamps=ts, compression=1), 0)
    assert read_header(log.read(0, 1 << 20).records).compression is Compression.GZIP
    assert log.offset_for_timestamp(BASE_TS + 35) == (4, BASE_TS + 40, 0)


def test_latest_timestamp_is_the_first_record_with_the_max(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=300))
    assert log.latest_timestamp() is None
    for i in range(10):
        peak = BASE_TS + 900 if i == 4 else BASE_TS + i
        log.append_as_leader(make_batch([b"a", b"b"], timestamps=[BASE_TS, peak]), 3)
    assert len(log.segments) > 2
    assert log.latest_timestamp() == (9, BASE_TS + 900, 3)


def test_log_append_time_stamps_batches(open_log: OpenLog, clock: Clock) -> None:
    log = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    clock.now = BASE_TS + 12345
    info = log.append_as_leader(make_batch([b"a", b"b"], timestamps=[5, 6]), 0)
    assert info.log_append_time == BASE_TS + 12345
    data = log.read(0, 1 << 20).records
    header = read_header(data)
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == BASE_TS + 12345
    assert crc_is_valid(data, header)
    assert [ts for _, ts, _ in records_of(data)] == [BASE_TS + 12345] * 2
    assert log.offset_for_timestamp(BASE_TS + 12000) == (0, BASE_TS + 12345, 0)


def test_idempotent_duplicate_returns_original_offsets_and_writes_nothing(
    open_log: OpenLog,
) -> None:
    log = open_log()
    log.append_as_leader(make_batch(), 0)
    first = log.append_as_leader(idempotent_batch(7, 0, 0, count=2), 0)
    for seq in range(2, 12, 2):
        log.append_as_leader(idempotent_batch(7, 0, seq, count=2), 0)
    size = log.size_in_bytes
    end = log.log_end_offset
    retry = log.append_as_leader(idempotent_batch(7, 0, 4, count=2), 0)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (5, 6)
    assert (log.size_in_bytes, log.log_end_offset) == (size, end)
    with pytest.raises(OutOfOrderSequence):  # older than the five kept
        log.append_as_leader(idempotent_batch(7, 0, 0, count=2), 0)
    assert first.first_offset == 1 and not first.duplicate


def test_idempotent_gap_and_fencing(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(idempotent_batch(7, 3, 0), 0)
    with pytest.raises(OutOfOrderSequence):
        log.append_as_leader(idempotent_batch(7, 3, 2), 0)
    with pytest.raises(InvalidProducerEpoch):
        log.append_as_leader(idempotent_batch(7, 2, 1), 0)
    with pytest.raises(OutOfOrderSequence):
        log.append_as_leader(idempotent_batch(7, 4, 1), 0)
    log.append_as_leader(idempotent_batch(7, 4, 0), 0)
    log.append_as_leader(idempotent_batch(7, 4, 1), 0)
    assert log.log_end_offset == 3


def _bad_crc() -> bytearray:
    b = make_batch()
    b[-1] ^= 0xFF
    return b


def _count_mismatch() -> bytearray:
    b = make_batch([b"a", b"b"])
    struct.pack_into(">i", b, 57, 3)
    return set_attribute_bits(b, 0)


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (_bad_crc, CorruptMessage),
        (lambda: make_batch([b"x" * 3000]), MessageTooLarge),
        (lambda: make_batch() + b"\x00\x01\x02", CorruptMessage),
        (lambda: make_batch() + make_batch()[:40], CorruptMessage),
        (lambda: set_attribute_bits(make_batch(), ATTR_CONTROL), InvalidRecord),
        (_count_mismatch, InvalidRecord),
        (lambda: make_batch(timestamps=[BASE_TS + 3_600_001]), RecordValidation),
        (lambda: make_batch(timestamps=[BASE_TS - 10_001]), RecordValidation),
        (lambda: make_batch(producer_id=5, producer_epoch=0, base_sequence=-1), InvalidRecord),
    ],
)
def test_refused_batches_leave_the_log_unchanged(
    open_log: OpenLog, tmp_path: Path, make: Callable[[], bytearray], error: type[KafkaError]
) -> None:
    log = open_log(LogConfig(max_message_bytes=2000, message_timestamp_before_max_ms=10_000))
    log.append_as_leader(make_batch([b"good"] * 2), 0)
    before = {p.name: p.read_bytes() for p in (tmp_path / "topic-0").iterdir()}
    with pytest.raises(error):
        log.append_as_leader(make_batch([b"ok"]) + make(), 0)
    after = {p.name: p.read_bytes() for p in (tmp_path / "topic-0").iterdir()}
    assert after == before
    assert log.log_end_offset == 2
    assert log.append_as_leader(make_batch(), 0).first_offset == 2


def test_empty_produce_is_invalid(open_log: OpenLog) -> None:
    with pytest.raises(InvalidRecord):
        open_log().append_as_leader(bytearray(), 0)


def test_produce_larger_than_a_segment_is_refused(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=500))
    with pytest.raises(RecordListTooLarge):
        log.append_as_leader(make_batch([b"x" * 300]) + make_batch([b"x" * 300]), 0)


def test_topic_compression_type_recompresses(open_log: OpenLog) -> None:
    log = open_log(LogConfig(compression_type="gzip"))
    log.append_as_leader(make_batch([b"hello"] * 4), 0)
    data = log.read(0, 1 << 20).records
    assert read_header(data).compression is Compression.GZIP
    assert [v for _, _, v in records_of(data)] == [b"hello"] * 4


def test_update_config_takes_effect_at_once(open_log: OpenLog) -> None:
    log = open_log()
    for _ in range(3):
        log.append_as_leader(make_batch([b"u" * 100]), 0)
    assert len(log.segments) == 1
    log.update_config(LogConfig(segment_bytes=200))
    log.append_as_leader(make_batch([b"u" * 100]), 0)
    assert len(log.segments) == 2


def test_truncate_to_drops_the_tail_across_segments(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=300))
    for i in range(10):
        log.append_as_leader(make_batch([b"t" * 30]), leader_epoch=i // 4)
    assert len(log.segments) > 2
    assert log.truncate_to(5)
    assert log.log_end_offset == 5
    got = []
    offset = 0
    while offset < log.log_end_offset:
        chunk = base_offsets(log.read(offset, 1 << 20).records)
        got += chunk
        offset = chunk[-1] + 1
    assert got == [0, 1, 2, 3, 4]
    assert log.leader_epochs.entries == [(0, 0), (1, 4)]
    assert log.append_as_leader(make_batch(), 5).first_offset == 5
    assert not log.truncate_to(100)


def test_truncate_fully_and_start_at(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    for _ in range(3):
        log.append_as_leader(make_batch(), 0)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset) == (1000, 1000)
    assert [s.base_offset for s in log.segments] == [1000]
    assert log.append_as_leader(make_batch(), 1).first_offset == 1000
    assert not (tmp_path / "topic-0" / "00000000000000000000.log").exists()


def test_flush_messages_and_flush_ms(open_log: OpenLog, clock: Clock) -> None:
    log = open_log(LogConfig(flush_messages=3, flush_ms=5000))
    log.append_as_leader(make_batch(), 0)
    log.append_as_leader(make_batch(), 0)
    assert not log.maybe_flush() and log.recovery_point == 0
    log.append_as_leader(make_batch(), 0)
    assert log.maybe_flush() and log.recovery_point == 3
    log.append_as_leader(make_batch(), 0)
    clock.now += 4999
    assert not log.maybe_flush() and not log.flush_if_due()
    clock.now += 1
    assert not log.maybe_flush(), "flush.ms is the timer's (flush_if_due), not the append's"
    assert log.flush_if_due() and log.recovery_point == 4
    assert not log.flush_if_due()


def test_flush_messages_queued_off_the_appending_thread_one_fsync_for_many(
        open_log: OpenLog) -> None:
    from concurrent.futures import ThreadPoolExecutor

    log = open_log(LogConfig(flush_messages=1))
    gate = threading.Event()
    with ThreadPoolExecutor(1) as flusher:
        flusher.submit(gate.wait)  # holds the flusher: the flushes queue behind it
        log.flushes.executor = flusher
        futures = []
        for _ in range(5):
            log.append_as_leader(make_batch([b"a", b"b"]), 0)
            assert not log.maybe_flush(), "nothing is fsynced on the appending thread"
            futures.append(log.pending_flush)
        assert log.recovery_point == 0
        assert len({id(f) for f in futures}) == 1, "one queued flush covers every append"
        gate.set()
        assert futures[0] is not None
        futures[0].result(10)
    assert log.recovery_point == log.log_end_offset == 10
    assert log.pending_flush is None


def test_follower_append_keeps_offsets_and_allows_gaps(open_log: OpenLog) -> None:
    leader = open_log(name="src-0")
    for _ in range(4):
        leader.append_as_leader(make_batch([b"a", b"b"]), leader_epoch=3)
    data = leader.read(0, 1 << 20).records
    follower = open_log(name="dst-0")
    info = follower.append_as_follower(data + data[:30])  # a fetch may end mid-batch
    assert (info.first_offset, info.last_offset, follower.log_end_offset) == (0, 7, 8)
    assert follower.read(0, 1 << 20).records == data
    assert follower.leader_epochs.entries == [(3, 0)]
    with pytest.raises(UnexpectedAppendOffset):
        follower.append_as_follower(data)
    gap = bytearray(data[: read_header(data).size])
    struct.pack_into(">q", gap, 0, 20)
    follower.append_as_follower(gap)
    assert follower.log_end_offset == 22


def test_follower_append_beyond_int32_relative_offsets_rolls(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch(), 0)
    far = bytearray(make_batch())
    struct.pack_into(">q", far, 0, 2**31 + 10)
    log.append_as_follower(far)
    assert [s.base_offset for s in log.segments] == [0, 2**31 + 10]


def test_close_and_reopen_clean(open_log: OpenLog, tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=500, index_interval_bytes=50)
    log = open_log(config)
    for i in range(30):
        log.append_as_leader(make_batch([b"c" * 20], timestamps=[BASE_TS + i]), 1)
    before = [log.read(o, 1 << 20).records for o in range(30)]
    log.close()
    reopened = open_log(config, clean_shutdown=True, recovery_point=0)
    assert reopened.log_end_offset == 30 and reopened.recovery_point == 30
    assert [reopened.read(o, 1 << 20).records for o in range(30)] == before
    assert reopened.latest_timestamp() == (29, BASE_TS + 29, 1)
    assert reopened.append_as_leader(make_batch(), 1).first_offset == 30


def test_each_segment_draws_its_roll_jitter(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_ms=1000, segment_jitter_ms=5000, segment_bytes=300))
    for _ in range(30):
        log.append_as_leader(make_batch([b"j" * 50]), 0)
    jitters = {s.roll_jitter_ms for s in log.segments}
    assert all(0 <= j < 1000 for j in jitters) and len(jitters) > 1


def test_log_start_offset_moves_forward_only(open_log: OpenLog) -> None:
    log = open_log()
    for epoch in (0, 1, 1, 2):
        log.append_as_leader(make_batch(), epoch)
    assert log.increment_log_start_offset(2)
    assert not log.increment_log_start_offset(1)
    assert log.leader_epochs.entries == [(1, 2), (2, 3)]
    with pytest.raises(OffsetOutOfRange):
        log.increment_log_start_offset(5)


def test_flush_in_a_worker_thread_while_appending(open_log: OpenLog) -> None:
    import threading

    log = open_log(LogConfig(segment_bytes=4000))
    stop = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        while not stop.is_set():
            try:
                log.flush()
            except BaseException as exc:  # reported below
                errors.append(exc)
                return

    worker = threading.Thread(target=flusher)
    worker.start()
    try:
        for _ in range(3000):
            log.append_as_leader(make_batch([b"w" * 40]), 0)
    finally:
        stop.set()
        worker.join()
    assert errors == []
    log.flush()
    assert log.recovery_point == log.log_end_offset == 3000
    assert len(log.segments) > 10


def test_reading_a_closed_log_fails_cleanly(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch(), 0)
    log.close()
    with pytest.raises(KafkaError):
        log.read(0, 100)
