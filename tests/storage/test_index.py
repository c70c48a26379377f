import struct
from pathlib import Path

import pytest

from odradek.storage.index import (
    CorruptIndex,
    IndexFull,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
    parse_offset_index,
    parse_time_index,
)


def test_offset_index_entries_are_relative_offset_and_position_big_endian(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1024)
    index.append(104, 4200)
    index.append(110, 8500)
    index.close()
    raw = (tmp_path / "00000000000000000100.index").read_bytes()
    assert raw == struct.pack(">ii", 4, 4200) + struct.pack(">ii", 10, 8500)
    assert parse_offset_index(raw, 100) == [(104, 4200), (110, 8500)]


def test_time_index_entries_are_timestamp_and_relative_offset(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "00000000000000000100.timeindex", 100, 1200)
    index.maybe_append(1_000, 103)
    index.maybe_append(1_000, 105)  # not larger: skipped
    index.maybe_append(999, 106)  # smaller: skipped
    index.maybe_append(2_000, 107)
    index.close()
    raw = (tmp_path / "00000000000000000100.timeindex").read_bytes()
    assert raw == struct.pack(">qi", 1_000, 3) + struct.pack(">qi", 2_000, 7)
    assert parse_time_index(raw, 100) == [(1_000, 103), (2_000, 107)]


def test_offset_lookup_finds_greatest_lower_bound(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 50, 1024)
    for i in range(1, 6):
        index.append(50 + 10 * i, 1000 * i)
    assert index.lookup(49) == OffsetPosition(50, 0)
    assert index.lookup(59) == OffsetPosition(50, 0)
    assert index.lookup(60) == OffsetPosition(60, 1000)
    assert index.lookup(75) == OffsetPosition(70, 2000)
    assert index.lookup(10**9) == OffsetPosition(100, 5000)
    assert index.lookup_position(3500) == OffsetPosition(80, 3000)
    assert index.lookup_position(999) == OffsetPosition(50, 0)


def test_time_lookup_and_truncation(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", 0, 1200)
    for i in range(1, 6):
        index.maybe_append(100 * i, 10 * i)
    assert index.lookup(50) == TimestampOffset(-1, 0)
    assert index.lookup(250) == TimestampOffset(200, 20)
    index.truncate_to(30)  # removes entries with offset >= 30
    assert index.entries == 2
    assert index.last_entry() == TimestampOffset(200, 20)
    assert (tmp_path / "x.timeindex").stat().st_size == 24


def test_offset_index_truncate_rewrites_file(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0, 1024)
    for i in range(1, 6):
        index.append(i * 10, i * 100)
    index.truncate_to(30)
    assert index.entries == 2
    assert (tmp_path / "x.index").stat().st_size == 16
    reopened = OffsetIndex(tmp_path / "x.index", 0, 1024)
    assert reopened.last_entry() == OffsetPosition(20, 200)


def test_full_indexes_refuse_and_time_index_keeps_a_slot(tmp_path: Path) -> None:
    offsets = OffsetIndex(tmp_path / "x.index", 0, 8 * 3)
    times = TimeIndex(tmp_path / "x.timeindex", 0, 12 * 3)
    for i in range(3):
        offsets.append(i + 1, i * 10)
    assert offsets.is_full()
    with pytest.raises(IndexFull):
        offsets.append(10, 100)
    times.maybe_append(1, 1)
    times.maybe_append(2, 2)
    assert times.is_full()  # the last slot is for the entry written at roll
    times.maybe_append(3, 3, skip_full_check=True)
    assert times.entries == 3


def test_reopened_index_is_lazy_and_sanity_checked(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, 1024)
    index.append(5, 100)
    index.append(9, 200)
    index.close()
    reopened = OffsetIndex(path, 0, 1024)
    assert reopened.entries == 2
    reopened.sanity_check(log_size=300)
    with pytest.raises(CorruptIndex):
        reopened.sanity_check(log_size=150)  # last entry points past the log
    path.write_bytes(path.read_bytes() + b"\x00\x00\x00")
    with pytest.raises(CorruptIndex):
        OffsetIndex(path, 0, 1024).sanity_check(log_size=300)


def test_non_monotonic_index_is_corrupt_on_load(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(struct.pack(">iiii", 10, 100, 5, 200))
    with pytest.raises(CorruptIndex):
        OffsetIndex(path, 0, 1024).lookup(7)
    tpath = tmp_path / "x.timeindex"
    tpath.write_bytes(struct.pack(">qiqi", 100, 1, 50, 2))
    with pytest.raises(CorruptIndex):
        TimeIndex(tpath, 0, 1200).sanity_check()
