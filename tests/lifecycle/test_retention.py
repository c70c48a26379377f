"""Retention on a real Log: by time, by size, by log start; the active segment; delays."""

from __future__ import annotations

from pathlib import Path

from odradek.storage.log_config import LogConfig
from odradek.storage.retention import delete_old_segments
from tests.lifecycle.helpers import BASE_TS, Clock, keyed_batch, open_log, read_all

HOUR = 3_600_000


def config(**overrides: object) -> LogConfig:
    values: dict[str, object] = {"segment_bytes": 500, "file_delete_delay_ms": 0}
    values.update(overrides)
    return LogConfig(**values)  # type: ignore[arg-type]


def fill(lg, count: int, ts: int, start: int = 0) -> None:  # type: ignore[no-untyped-def]
    for i in range(start, start + count):
        lg.append_as_leader(keyed_batch([(b"k", b"value-%04d" % i)], ts=ts), 0)
    lg.high_watermark = lg.log_end_offset


def test_segments_older_than_retention_ms_go_and_nothing_newer(tmp_path: Path) -> None:
    clock = Clock(BASE_TS + 10 * HOUR)
    lg = open_log(tmp_path, config(retention_ms=HOUR), clock)
    fill(lg, 40, ts=BASE_TS)  # written with timestamps ten hours old
    lg.roll()
    fill(lg, 40, ts=clock.now, start=40)
    old_segments = [s for s in lg.segments if s.max_timestamp == BASE_TS]
    deleted = delete_old_segments(lg, clock.now)
    assert deleted == len(old_segments) > 1
    assert lg.log_start_offset == 40
    assert [r.offset for r in read_all(lg)] == list(range(40, 80))
    assert all(s.max_timestamp == clock.now for s in lg.segments)
    lg.close()


def test_an_expired_active_segment_is_rolled_then_deleted(tmp_path: Path) -> None:
    clock = Clock(BASE_TS + 10 * HOUR)
    lg = open_log(tmp_path, config(retention_ms=HOUR), clock)
    fill(lg, 3, ts=BASE_TS)
    assert len(lg.segments) == 1
    assert delete_old_segments(lg, clock.now) == 1
    # The log is empty but keeps its offsets: the next record is offset 3.
    assert (lg.log_start_offset, lg.log_end_offset, len(lg.segments)) == (3, 3, 1)
    assert lg.active_segment.size == 0
    assert lg.append_as_leader(keyed_batch([(b"k", b"new")], ts=clock.now), 0).first_offset == 3
    assert delete_old_segments(lg, clock.now) == 0
    lg.close()


def test_retention_bytes_keeps_the_partition_near_its_bound(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, config(retention_bytes=2000, retention_ms=-1), clock)
    fill(lg, 200, ts=clock.now)
    assert lg.size_in_bytes > 2000
    delete_old_segments(lg, clock.now)
    # Kafka's rule: old segments go while the rest stays at or above the bound, so the
    # partition ends within one segment of it.
    assert 2000 - 500 < lg.size_in_bytes <= 2000 + 500
    assert read_all(lg)[-1].offset == 199
    lg.close()


def test_a_moved_log_start_offset_deletes_the_segments_below_it(tmp_path: Path) -> None:
    clock = Clock()
    # Compacted only: no time or size retention, but log start breaches still apply.
    lg = open_log(tmp_path, config(cleanup_policy=("compact",)), clock)
    fill(lg, 100, ts=clock.now)
    below = [s for s in lg.segments[1:] if s.base_offset <= 50]
    assert lg.increment_log_start_offset(50)
    assert delete_old_segments(lg, clock.now) == len(below)
    assert lg.segments[0].base_offset <= 50 < lg.segments[1].base_offset
    assert read_all(lg)[0].offset == 50
    lg.close()


def test_deleted_files_wait_for_file_delete_delay(tmp_path: Path) -> None:
    clock = Clock(BASE_TS + 10 * HOUR)
    lg = open_log(tmp_path, config(retention_ms=HOUR, file_delete_delay_ms=60_000), clock)
    fill(lg, 40, ts=BASE_TS)
    lg.roll()
    fill(lg, 1, ts=clock.now, start=40)
    deleted = delete_old_segments(lg, clock.now)
    names = sorted(p.name for p in lg.directory.iterdir() if p.name.endswith(".deleted"))
    assert len([n for n in names if n.endswith(".log.deleted")]) == deleted > 0
    assert lg.purge_deleted_segments(clock.now + 59_000) == 0
    assert lg.purge_deleted_segments(clock.now + 60_000) == deleted
    assert not [p for p in lg.directory.iterdir() if p.name.endswith(".deleted")]
    lg.close()


def test_nothing_at_or_above_the_high_watermark_goes(tmp_path: Path) -> None:
    clock = Clock(BASE_TS + 10 * HOUR)
    lg = open_log(tmp_path, config(retention_ms=HOUR), clock)
    fill(lg, 40, ts=BASE_TS)
    lg.high_watermark = 12  # followers have not caught up
    delete_old_segments(lg, clock.now)
    assert lg.log_start_offset <= 12
    lg.close()


def test_a_shorter_retention_takes_effect_at_the_next_check(tmp_path: Path) -> None:
    clock = Clock(BASE_TS + 10 * HOUR)
    lg = open_log(tmp_path, config(), clock)  # 3 days
    fill(lg, 40, ts=BASE_TS)
    lg.roll()
    fill(lg, 1, ts=clock.now, start=40)
    assert delete_old_segments(lg, clock.now) == 0
    lg.update_config(config(retention_ms=HOUR))
    assert delete_old_segments(lg, clock.now) > 0
    assert lg.log_start_offset == 40
    lg.close()
