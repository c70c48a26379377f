"""LogLoader: clean opens trust the files, unclean ones scan from the recovery point."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from storage_helpers import BASE_TS, base_offsets, idempotent_batch, make_batch

from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig
from odradek.storage.segment import LogSegment

OpenLog = Callable[..., Log]
CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=100)


@pytest.fixture
def recover_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Base offsets of the segments recovery scans."""
    calls: list[int] = []
    original = LogSegment.recover

    def spy(self: LogSegment, *args: object, **kwargs: object) -> int:
        calls.append(self.base_offset)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogSegment, "recover", spy)
    yield calls


def fill(log: Log, count: int) -> list[bytes]:
    """Append `count` one-record batches; returns each batch as stored."""
    stored = []
    for i in range(count):
        batch = make_batch([b"value-%d" % i], timestamps=[BASE_TS + i])
        log.append_as_leader(batch, leader_epoch=1)
        stored.append(bytes(batch))
    return stored


def read_all(log: Log) -> bytes:
    out = b""
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 30).records
        out += chunk
        offset = base_offsets(chunk)[-1] + 1
    return out


def segment_files(tmp_path: Path, suffix: str) -> list[Path]:
    return sorted((tmp_path / "topic-0").glob(f"*{suffix}"))


def test_torn_tail_is_dropped_and_earlier_batches_survive(
    open_log: OpenLog, tmp_path: Path
) -> None:
    log = open_log(CONFIG)
    stored = fill(log, 100)
    log.close_without_flush()
    last = segment_files(tmp_path, ".log")[-1]
    os.truncate(last, last.stat().st_size - 5)  # the last batch loses its tail
    reopened = open_log(CONFIG)
    assert reopened.log_end_offset == 99
    assert read_all(reopened) == b"".join(stored[:99])
    assert reopened.append_as_leader(make_batch(), 1).first_offset == 99


@pytest.mark.parametrize("tail", [b"garbage!" * 10, bytes(4096), b"\x00" * 7])
def test_trailing_garbage_is_dropped(open_log: OpenLog, tmp_path: Path, tail: bytes) -> None:
    log = open_log(CONFIG)
    stored = fill(log, 40)
    log.close_without_flush()
    with open(segment_files(tmp_path, ".log")[-1], "ab") as f:
        f.write(tail)
    reopened = open_log(CONFIG)
    assert reopened.log_end_offset == 40
    assert read_all(reopened) == b"".join(stored)


def test_corrupt_batch_cuts_the_log_and_later_segments(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(CONFIG)
    stored = fill(log, 100)
    segments = [(s.base_offset, s.size) for s in log.segments]
    assert len(segments) >= 3
    log.close_without_flush()
    second = segment_files(tmp_path, ".log")[1]
    with open(second, "r+b") as f:  # flip a byte inside the second batch's records
        f.seek(len(stored[0]) + 70)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    reopened = open_log(CONFIG)
    cut = segments[1][0] + 1
    assert reopened.log_end_offset == cut
    assert len(reopened.segments) == 2
    assert read_all(reopened) == b"".join(stored[:cut])


def test_indexes_are_rebuilt_byte_for_byte(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(CONFIG)
    fill(log, 100)
    log.close()
    indexes = {p.name: p.read_bytes() for p in segment_files(tmp_path, "index")}
    for path in segment_files(tmp_path, ".index")[:2]:
        path.unlink()
    timeindex = segment_files(tmp_path, ".timeindex")[-1]
    timeindex.write_bytes(b"\x01" * 7)
    reopened = open_log(CONFIG, clean_shutdown=True)
    assert reopened.log_end_offset == 100
    reopened.close()
    assert {p.name: p.read_bytes() for p in segment_files(tmp_path, "index")} == indexes


def test_index_pointing_at_nothing_is_rebuilt_after_clean_shutdown(
    open_log: OpenLog, tmp_path: Path, recover_calls: list[int]
) -> None:
    log = open_log(CONFIG)
    fill(log, 100)
    log.close()
    first_index = segment_files(tmp_path, ".index")[0]
    raw = bytearray(first_index.read_bytes())
    raw[-1] ^= 0x01  # the last entry's position is off by one
    first_index.write_bytes(bytes(raw))
    reopened = open_log(CONFIG, clean_shutdown=True)
    # as Kafka's LazyIndex: an old segment's index is checked on first use, not at load
    assert recover_calls == []
    assert reopened.read(5, 10).first_offset == 5
    assert recover_calls == [0]
    assert first_index.read_bytes() != bytes(raw)  # rebuilt on disk too


def test_clean_shutdown_skips_the_scan(
    open_log: OpenLog, recover_calls: list[int]
) -> None:
    log = open_log(CONFIG)
    fill(log, 100)
    log.close()
    reopened = open_log(CONFIG, clean_shutdown=True)
    assert recover_calls == []
    assert reopened.log_end_offset == 100 and reopened.recovery_point == 100


def test_clean_marker_with_a_torn_tail_still_recovers_the_tail(
    open_log: OpenLog, tmp_path: Path
) -> None:
    log = open_log(CONFIG)
    stored = fill(log, 30)
    log.close()
    last = segment_files(tmp_path, ".log")[-1]
    with open(last, "ab") as f:
        f.write(b"\x00" * 100)
    reopened = open_log(CONFIG, clean_shutdown=True)
    assert reopened.log_end_offset == 30
    assert reopened.active_segment.size == last.stat().st_size
    assert read_all(reopened) == b"".join(stored)


def test_unclean_open_scans_only_from_the_recovery_point(
    open_log: OpenLog, recover_calls: list[int]
) -> None:
    log = open_log(CONFIG)
    fill(log, 100)
    bases = [s.base_offset for s in log.segments]
    log.flush(bases[2] + 3)
    point = log.recovery_point
    log.close_without_flush()
    reopened = open_log(CONFIG, recovery_point=point)
    assert recover_calls == bases[2:]
    assert reopened.log_end_offset == 100
    # as Kafka's LogLoader: recovery syncs nothing, the recovery point stays until the
    # log's next flush (a restart of thousands of partitions paid three fsyncs each)
    assert reopened.recovery_point == point
    reopened.flush()
    assert reopened.recovery_point == 100


def test_producer_state_survives_a_crash(open_log: OpenLog) -> None:
    log = open_log(CONFIG)
    for seq in range(0, 240, 3):  # rolls write snapshots; the tail needs a scan
        log.append_as_leader(idempotent_batch(42, 1, seq, count=3), 1)
    assert len(log.segments) > 1
    end = log.log_end_offset
    log.close_without_flush()
    reopened = open_log(CONFIG)
    retry = reopened.append_as_leader(idempotent_batch(42, 1, 237, count=3), 1)
    assert retry.duplicate and retry.last_offset == end - 1
    assert reopened.append_as_leader(idempotent_batch(42, 1, 240), 1).first_offset == end


def test_producer_state_survives_a_clean_restart_without_a_scan(
    open_log: OpenLog, tmp_path: Path, recover_calls: list[int]
) -> None:
    log = open_log(CONFIG)
    for seq in range(5):
        log.append_as_leader(idempotent_batch(42, 1, seq), 1)
    log.close()
    assert (tmp_path / "topic-0" / "00000000000000000005.snapshot").exists()
    reopened = open_log(CONFIG, clean_shutdown=True)
    assert recover_calls == []
    assert reopened.append_as_leader(idempotent_batch(42, 1, 4), 1).duplicate


def test_leader_epochs_rebuilt_from_batches(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(CONFIG)
    for epoch in (1, 1, 3, 3, 5):
        log.append_as_leader(make_batch(), epoch)
    log.close_without_flush()
    (tmp_path / "topic-0" / "leader-epoch-checkpoint").unlink()
    reopened = open_log(CONFIG)
    assert reopened.leader_epochs.entries == [(1, 0), (3, 2), (5, 4)]


def test_leftover_files_are_finished(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(CONFIG)
    stored = fill(log, 60)
    bases = [s.base_offset for s in log.segments]
    log.close()
    d = tmp_path / "topic-0"
    (d / "00000000000000099999.index").write_bytes(b"")  # orphan index
    (d / "00000000000000000007.log.deleted").write_bytes(b"x")
    (d / f"{bases[1]:020d}.log.cleaned").write_bytes(b"x")
    reopened = open_log(CONFIG, clean_shutdown=True)
    names = os.listdir(d)
    assert not [n for n in names if n.endswith((".deleted", ".cleaned"))]
    assert "00000000000000099999.index" not in names
    assert read_all(reopened) == b"".join(stored)


def test_swap_segment_replaces_what_it_covers(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(CONFIG)
    stored = fill(log, 60)
    bases = [s.base_offset for s in log.segments]
    log.close()
    d = tmp_path / "topic-0"
    # A "compacted" first segment: the first two segments' batches, as one swap file.
    first_two = b"".join(stored[: bases[2]])
    (d / "00000000000000000000.log.swap").write_bytes(first_two)
    reopened = open_log(CONFIG)
    assert [s.base_offset for s in reopened.segments] == [0, *bases[2:]]
    assert read_all(reopened) == b"".join(stored)
    assert not list(d.glob("*.swap"))


def test_log_start_beyond_the_data_starts_empty(open_log: OpenLog) -> None:
    log = open_log(CONFIG)
    fill(log, 10)
    log.close_without_flush()
    reopened = open_log(CONFIG, log_start_offset=500)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (500, 500)
    assert reopened.append_as_leader(make_batch(), 1).first_offset == 500


def test_recovery_recreates_an_index_file_even_without_entries(
    open_log: OpenLog, tmp_path: Path
) -> None:
    log = open_log(LogConfig(index_interval_bytes=1 << 20))
    fill(log, 3)
    log.close()
    index = segment_files(tmp_path, ".index")[0]
    index.unlink()
    open_log(LogConfig(index_interval_bytes=1 << 20), clean_shutdown=True).close()
    assert index.exists() and index.read_bytes() == b""


def test_crash_recovery_rewrites_only_the_index_files_that_differ(
    open_log: OpenLog, tmp_path: Path
) -> None:
    log = open_log(CONFIG)
    stored = fill(log, 30)
    log.close_without_flush()

    def offset_indexes() -> dict[Path, tuple[int, int, bytes]]:
        return {p: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes())
                for p in segment_files(tmp_path, ".index")}

    intact = offset_indexes()
    reopened = open_log(CONFIG)  # after a crash: the active segment is recovered
    assert read_all(reopened) == b"".join(stored)
    reopened.close_without_flush()
    assert offset_indexes() == intact  # the same entries: the files were not touched
    last = segment_files(tmp_path, ".log")[-1]
    entry = intact[last.with_suffix(".index")][2][-8:]  # the active index's last entry
    torn_offset = int(last.name.split(".")[0]) + int.from_bytes(entry[:4], "big")
    # torn inside the batch that entry points at: the entry must go from the file
    os.truncate(last, int.from_bytes(entry[4:], "big") + 5)
    again = open_log(CONFIG)
    assert again.log_end_offset == torn_offset
    assert read_all(again) == b"".join(stored[:torn_offset])
    again.close_without_flush()
    rebuilt = offset_indexes()
    assert rebuilt[last.with_suffix(".index")][2] != intact[last.with_suffix(".index")][2]
    assert {p: v for p, v in rebuilt.items() if p != last.with_suffix(".index")} == \
        {p: v for p, v in intact.items() if p != last.with_suffix(".index")}
