"""The cleaner on a real Log: last value per key, tombstones, offsets, producers."""

from __future__ import annotations

import shutil
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from odradek.protocol.errors import ErrorCode, RecordValidation
from odradek.protocol.records import encode_control_batch
from odradek.storage.local_log import LocalLog
from odradek.storage.log import Log
from tests.lifecycle.helpers import (
    Clock,
    clean_once,
    compact_config,
    keyed_batch,
    open_log,
    read_all,
    table_of,
)


def test_compaction_keeps_the_last_value_of_each_key(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, compact_config(), clock)
    written = []
    for i in range(200):
        pair = (b"k%d" % (i % 7), b"v%d" % i)
        written.append(pair)
        lg.append_as_leader(keyed_batch([pair]), 0)
    lg.high_watermark = lg.log_end_offset
    before = lg.size_in_bytes
    end, _ = clean_once(lg, clock)
    records = read_all(lg)
    assert table_of((r.key, r.value) for r in records) == table_of(written)
    assert lg.size_in_bytes < before
    offsets = [r.offset for r in records]
    assert offsets == sorted(offsets)
    by_offset = dict(enumerate(written))
    assert all((r.key, r.value) == by_offset[r.offset] for r in records)
    assert end <= lg.active_segment.base_offset
    lg.close()


# ---------------------------------------------------------------- the table property



KEYS = [b"a", b"b", b"c", b"d", b"e", b"f"]
pairs = st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=0, max_size=40)))
batches = st.lists(st.lists(pairs, min_size=1, max_size=6), min_size=1, max_size=50)


def _clean_until_done(lg: Log, clock: Clock, map_bytes: int, checkpoint: int | None) -> int | None:
    for _ in range(60):
        end, ltc = clean_once(lg, clock, map_bytes, checkpoint)
        if end == checkpoint or end >= ltc.first_uncleanable_offset:
            return end
        checkpoint = end
    raise AssertionError("the cleaner made no progress")


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=batches,
    cleanings=st.sets(st.integers(min_value=0, max_value=49), max_size=5),
    map_bytes=st.sampled_from([150, 600, 1 << 20]),
    segment_bytes=st.sampled_from([300, 700, 4096]),
)
def test_a_compacted_log_read_from_the_start_rebuilds_the_table(
    tmp_path_factory: object, data: list[list[tuple[bytes, bytes | None]]], cleanings: set[int],
    map_bytes: int, segment_bytes: int,
) -> None:
    tmp = tmp_path_factory.mktemp("c")  # type: ignore[attr-defined]
    clock = Clock()
    lg = open_log(tmp, compact_config(segment_bytes=segment_bytes, delete_retention_ms=1000),
                  clock)
    written: list[tuple[bytes | None, bytes | None]] = []
    checkpoint: int | None = None
    for i, batch in enumerate(data):
        lg.append_as_leader(keyed_batch(batch, ts=clock.now), 0)
        written.extend(batch)
        lg.high_watermark = lg.log_end_offset
        clock.now += 10
        if i in cleanings:
            checkpoint = _clean_until_done(lg, clock, map_bytes, checkpoint)
    checkpoint = _clean_until_done(lg, clock, map_bytes, checkpoint)
    records = read_all(lg)
    # Every record left is the one written at its offset, in offset order.
    assert [r.offset for r in records] == sorted({r.offset for r in records})
    assert all((r.key, r.value) == written[r.offset] for r in records)
    # A consumer reading from the start rebuilds the table of one that read it all along.
    assert table_of((r.key, r.value) for r in records) == table_of(written)
    # Past delete.retention.ms a cleaning removes every tombstone it can reach.
    clock.now += 2000
    _clean_until_done(lg, clock, map_bytes, checkpoint)
    bound = lg.active_segment.base_offset
    after = read_all(lg)
    assert table_of((r.key, r.value) for r in after) == table_of(written)
    cleaned = [r for r in after if r.offset < bound]
    assert not [r for r in cleaned if r.value is None]
    # Below the active segment each key is left once: its last value.
    assert len({r.key for r in cleaned}) == len(cleaned)
    assert lg.log_end_offset == len(written)
    lg.close()
    reopened = Log.open(lg.directory, lg.config, clock_ms=clock, clean_shutdown=True)
    reopened.high_watermark = reopened.log_end_offset
    assert [(r.offset, r.key, r.value) for r in read_all(reopened)] == [
        (r.offset, r.key, r.value) for r in after
    ]
    reopened.close()


# ---------------------------------------------------------------- producers and transactions





def test_an_idempotent_producers_last_sequence_survives_compaction_and_restart(
    tmp_path: Path,
) -> None:
    clock = Clock()
    lg = open_log(tmp_path, compact_config(), clock)
    for seq in range(30):
        lg.append_as_leader(keyed_batch([(b"same-key", b"v%d" % seq)], producer_id=7,
                                        producer_epoch=0, base_sequence=seq), 0)
    last_batch = keyed_batch([(b"same-key", b"v29")], producer_id=7, producer_epoch=0,
                             base_sequence=29)
    lg.roll()
    lg.append_as_leader(keyed_batch([(b"other", b"x")]), 0)
    lg.high_watermark = lg.log_end_offset
    clean_once(lg, clock)
    assert [(r.offset, r.value) for r in read_all(lg) if r.key == b"same-key"] == [(29, b"v29")]
    lg.close()
    reopened = Log.open(lg.directory, lg.config, clock_ms=clock, clean_shutdown=True)
    # The retry of sequence 29 is still known: a duplicate, not a new record.
    assert reopened.append_as_leader(last_batch, 0).duplicate
    reopened.close()


def _follower_append(lg: Log, batch: bytes) -> None:
    lg.append_as_follower(bytearray(batch))
    lg.high_watermark = lg.log_end_offset


def test_aborted_transactions_go_and_their_markers_follow_after_the_horizon(
    tmp_path: Path,
) -> None:
    clock = Clock()
    lg = open_log(tmp_path, compact_config(delete_retention_ms=1000), clock)
    offset = 0

    def txn(pid: int, pairs: list[tuple[bytes, bytes]], commit: bool) -> None:
        nonlocal offset
        for seq, pair in enumerate(pairs):
            _follower_append(lg, keyed_batch([pair], base_offset=offset, producer_id=pid,
                                             producer_epoch=0, base_sequence=seq,
                                             transactional=True))
            offset += 1
        _follower_append(lg, encode_control_batch(commit=commit, producer_id=pid,
                                                  producer_epoch=0, coordinator_epoch=0,
                                                  base_offset=offset, timestamp=clock.now))
        offset += 1

    txn(1, [(b"k1", b"committed")], commit=True)
    txn(2, [(b"k2", b"aborted"), (b"k1", b"aborted too")], commit=False)
    txn(3, [(b"k3", b"committed")], commit=True)
    lg.roll()
    _follower_append(lg, keyed_batch([(b"tail", b"x")], base_offset=offset))
    clean_once(lg, clock)
    kept = [(r.key, r.value) for r in read_all(lg)]
    assert (b"k2", b"aborted") not in kept and (b"k1", b"aborted too") not in kept
    assert (b"k1", b"committed") in kept and (b"k3", b"committed") in kept
    # Producer 2's last batch stays, emptied, while the producer is alive (its epoch and
    # sequence), and with it the abort marker. Once producers expire, a pass finds the
    # transaction gone and gives the marker a horizon; a pass after the horizon removes it.
    assert [b.header.producer_id for b in _batches(lg) if b.is_control] == [1, 2, 3]
    lg.remove_expired_producers(clock.now + 10 * 86_400_000)
    clean_once(lg, clock)
    clean_once(lg, clock)
    clock.now += 5000
    clean_once(lg, clock)
    controls = [b.header.producer_id for b in _batches(lg) if b.is_control and b.records]
    # The commit markers stay: their transactions' records are still the keys' last values
    # (the aborted write to k1 does not count).
    assert controls == [1, 3]


def _batches(lg: Log) -> list:  # type: ignore[type-arg]
    from odradek.protocol.records import decode_batches

    out = []
    for seg in lg.segments:
        out.extend(decode_batches(seg.read_batch(0, seg.size)))
    return out


def test_a_compacted_topic_refuses_records_without_a_key(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, compact_config(), clock)
    with pytest.raises(RecordValidation, match="without key in topic partition t-0") as e:
        lg.append_as_leader(keyed_batch([(b"k", b"v"), (None, b"v")]), 0)
    assert e.value.code == ErrorCode.invalid_record
    assert [i for i, _ in e.value.record_errors] == [1]
    assert lg.log_end_offset == 0
    lg.close()


def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, compact_config(min_compaction_lag_ms=60_000), clock)
    for i in range(40):
        lg.append_as_leader(keyed_batch([(b"k", b"v%d" % i)], ts=clock.now), 0)
    lg.high_watermark = lg.log_end_offset
    end, ltc = clean_once(lg, clock)
    assert ltc.cleanable_bytes == 0 and end == 0
    assert len(read_all(lg)) == 40
    clock.now += 61_000
    clean_once(lg, clock)
    assert len([r for r in read_all(lg) if r.offset < lg.active_segment.base_offset]) == 1
    lg.close()


def test_max_compaction_lag_rolls_the_active_segment(tmp_path: Path) -> None:
    clock = Clock()
    config = compact_config(max_compaction_lag_ms=1000, segment_bytes=1 << 20)
    lg = open_log(tmp_path, config, clock)
    lg.append_as_leader(keyed_batch([(b"k", b"v1")], ts=clock.now), 0)
    clock.now += 1500
    lg.append_as_leader(keyed_batch([(b"k", b"v2")], ts=clock.now), 0)
    assert len(lg.segments) == 2, "segment.ms is capped by max.compaction.lag.ms"
    lg.close()


# ---------------------------------------------------------------- crash safety


def test_a_swap_cut_short_by_a_crash_is_completed_by_the_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    config = compact_config(segment_bytes=1000)
    lg = open_log(tmp_path, config, clock)
    keys = [b"a%d", b"b%d", b"b%d", b"c%d"]  # the second segment is wholly superseded
    for i in range(25):
        if i and i % 5 == 0:
            lg.roll()
        lg.append_as_leader(keyed_batch([(keys[min(i // 5, 3)] % (i % 5), b"v%d" % i)]), 0)
    lg.high_watermark = lg.log_end_offset
    lg.flush()
    shutil.copytree(lg.directory, tmp_path / "copy" / "t-0")
    clean_once(lg, clock)
    expected = [(r.offset, r.key, r.value) for r in read_all(lg)]
    assert [r[0] for r in expected] == [0, 1, 2, 3, 4, *range(10, 25)]
    lg.close()

    # The same cleaning on the copy, crashing once the first group's .swap exists and
    # before its old segments are renamed .deleted: the files are saved as the crash
    # left them. The group's second segment holds nothing that survives, so only the
    # emptied last batch kept at the group's end tells the loader to delete it.
    other = Log.open(tmp_path / "copy" / "t-0", config, clock_ms=clock)
    other.high_watermark = other.log_end_offset

    def crash(self: LocalLog, _segments: object) -> None:
        assert any(p.name.endswith(".log.swap") for p in self.directory.iterdir())
        shutil.copytree(self.directory, tmp_path / "crashed" / "t-0")
        raise RuntimeError("power cut")

    monkeypatch.setattr(LocalLog, "_delete_later", crash)
    with pytest.raises(RuntimeError, match="power cut"):
        clean_once(other, clock)
    monkeypatch.undo()
    other.close_without_flush()
    reopened = Log.open(tmp_path / "crashed" / "t-0", config, clock_ms=clock)
    reopened.high_watermark = reopened.log_end_offset
    got = [(r.offset, r.key, r.value) for r in read_all(reopened)]
    # The first group is swapped in, the second group is as it was (not yet cleaned).
    assert [r for r in got if r[0] < 10] == [r for r in expected if r[0] < 10]
    assert [r[0] for r in got] == [0, 1, 2, 3, 4, *range(10, 25)]
    assert not [p for p in reopened.directory.iterdir() if p.suffix in (".swap", ".cleaned")]
    reopened.close()


def test_a_log_start_inside_the_active_segment_is_cleaned_safely(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, compact_config(cleanup_policy=("compact", "delete"),
                                           segment_bytes=600), clock)
    for i in range(40):
        lg.append_as_leader(keyed_batch([(b"k%d" % (i % 4), b"v%d" % i)]), 0)
    lg.high_watermark = lg.log_end_offset
    lg.increment_log_start_offset(lg.log_end_offset - 2)  # DeleteRecords near the end
    for _ in range(3):
        clean_once(lg, clock, checkpoint=lg.log_start_offset)
    assert [r.offset for r in read_all(lg)] == [38, 39]
    lg.close()
