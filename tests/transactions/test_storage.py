"""Transactions in the log: the LSO, markers, `.txnindex`, snapshots and recovery."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol.errors import ErrorCode, InvalidProducerEpoch, KafkaError
from odradek.protocol.records import NewRecord, decode_batches, encode_batch
from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig
from odradek.storage.txn_index import ENTRY, AbortedTxnEntry, read_entries, txn_index_path

NOW = 1_700_000_000_000


@pytest.fixture
def open_log(tmp_path: Path) -> Iterator[Callable[..., Log]]:
    opened: list[Log] = []

    def _open(config: LogConfig | None = None, **kwargs: Any) -> Log:
        log = Log.open(tmp_path / "t-0", config or LogConfig(), clock_ms=lambda: NOW, **kwargs)
        log.high_watermark = log.log_end_offset
        opened.append(log)
        return log

    yield _open
    for log in opened:
        if not log.closed:
            log.close_without_flush()


def data(pid: int, seq: int, count: int = 1, epoch: int = 0, txn: bool = True,
         value: bytes = b"v") -> bytearray:
    return bytearray(encode_batch([NewRecord(value=value, timestamp=NOW)] * count,
                                  producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                  transactional=txn))


def append(log: Log, batch: bytearray) -> int:
    info = log.append_as_leader(batch, 0)
    log.high_watermark = log.log_end_offset
    return info.first_offset


def marker(log: Log, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> int:
    info = log.append_marker(producer_id=pid, producer_epoch=epoch,
                             coordinator_epoch=coordinator_epoch, commit=commit, leader_epoch=0)
    log.high_watermark = log.log_end_offset
    return info.first_offset


def read_aborted(log: Log, start: int = 0) -> list[tuple[int, int]]:
    """What read_committed fetches from `start` to the LSO are told to drop (a read
    returns one segment's batches at most, so this fetches until it reaches the LSO)."""
    out: list[tuple[int, int]] = []
    while start < log.last_stable_offset:
        records = log.read(start, 1 << 20, max_offset=log.last_stable_offset).records
        out += [a for a in log.collect_aborted_transactions(start, records) if a not in out]
        start = list(decode_batches(records))[-1].last_offset + 1
    return out


def test_lso_stops_at_the_oldest_open_transaction(open_log: Callable[..., Log]) -> None:
    log = open_log()
    append(log, data(-1, -1, txn=False))                  # 0 plain
    assert log.last_stable_offset == 1
    append(log, data(7, 0, count=2))                      # 1-2 producer 7 opens
    append(log, data(-1, -1, txn=False))                  # 3 plain, above the LSO
    append(log, data(8, 0))                               # 4 producer 8 opens
    assert log.last_stable_offset == 1
    assert marker(log, 7, commit=True) == 5
    assert log.last_stable_offset == 4                    # producer 8's transaction holds it
    assert marker(log, 8, commit=False) == 6
    assert log.last_stable_offset == 7 == log.high_watermark
    # read_committed reads stop at the LSO: nothing of an open transaction leaks
    append(log, data(9, 0))
    got = list(decode_batches(log.read(0, 1 << 20, max_offset=log.last_stable_offset).records))
    assert [b.base_offset for b in got] == [0, 1, 3, 4, 5, 6]


def test_an_abort_is_indexed_in_kafkas_txnindex_format(open_log: Callable[..., Log]) -> None:
    log = open_log()
    append(log, data(7, 0, count=3))                      # 0-2
    append(log, data(8, 0))                               # 3
    marker(log, 7, commit=False)                          # 4: aborts 0-2, LSO then 3
    marker(log, 8, commit=True)                           # 5
    path = txn_index_path(log.active_segment)
    raw = path.read_bytes()
    assert len(raw) == 34 == ENTRY.size
    assert struct.unpack(">hqqqq", raw) == (0, 7, 0, 4, 3)
    assert read_entries(path) == [AbortedTxnEntry(7, 0, 4, 3)]
    assert read_aborted(log) == [(7, 0)]
    assert read_aborted(log, start=5) == []               # ended before the fetch


def test_aborted_transactions_are_found_across_segments(open_log: Callable[..., Log]) -> None:
    log = open_log(LogConfig(segment_bytes=300))
    starts = []
    for pid in range(10, 16):                             # a segment every two transactions
        starts.append(append(log, data(pid, 0)))
        marker(log, pid, commit=pid % 2 == 0)
    assert len(log.segments) == 3
    aborted = {(pid, start) for pid, start in zip(range(10, 16), starts, strict=True)
               if pid % 2}
    assert set(read_aborted(log)) == aborted
    # a fetch from the middle gets only what overlaps it
    middle = starts[3]
    assert set(read_aborted(log, middle)) == {(p, s) for p, s in aborted if s >= middle}


def test_a_marker_fences_the_producers_older_epoch(open_log: Callable[..., Log]) -> None:
    log = open_log()
    append(log, data(7, 0))
    marker(log, 7, commit=False, epoch=1)                 # a fence: abort with epoch + 1
    with pytest.raises(InvalidProducerEpoch):
        append(log, data(7, 1))                           # the zombie, still at epoch 0
    with pytest.raises(InvalidProducerEpoch):
        marker(log, 7, commit=True, epoch=0)
    append(log, data(7, 0, epoch=1))                      # the new producer starts at 0
    with pytest.raises(KafkaError) as info:               # a deposed coordinator's marker
        marker(log, 7, commit=True, epoch=1, coordinator_epoch=-1)
    assert info.value.code == ErrorCode.transaction_coordinator_fenced


def test_an_open_transaction_survives_a_clean_restart(open_log: Callable[..., Log]) -> None:
    log = open_log()
    append(log, data(-1, -1, txn=False))
    append(log, data(7, 0))
    append(log, data(-1, -1, txn=False))
    assert log.last_stable_offset == 1
    log.close()
    log = open_log(clean_shutdown=True, recovery_point=3)
    assert log.last_stable_offset == 1                    # from the snapshot at the log end
    marker(log, 7, commit=False)
    assert log.last_stable_offset == 4
    assert read_aborted(log) == [(7, 1)]


def test_recovery_rebuilds_the_txnindex_and_the_lso(open_log: Callable[..., Log]) -> None:
    log = open_log(LogConfig(segment_bytes=400))
    append(log, data(7, 0))                               # 0: 7 opens, stays open
    for pid in range(20, 26):
        append(log, data(pid, 0))
        marker(log, pid, commit=False)
    index_files = [txn_index_path(s) for s in log.segments]
    expected = [read_entries(path) for path in index_files]
    assert sum(map(len, expected)) == 6 and log.last_stable_offset == 0
    log.close_without_flush()                             # a crash: nothing flushed, ...
    for path in index_files:                              # ... and the indexes lost
        path.unlink(missing_ok=True)
    log = open_log(LogConfig(segment_bytes=400), recovery_point=0)
    assert log.last_stable_offset == 0                    # 7's transaction is open again
    assert [read_entries(path) for path in index_files] == expected
    marker(log, 7, commit=True)
    assert log.last_stable_offset == log.log_end_offset
    assert len(read_aborted(log)) == 6


def test_truncation_drops_the_index_entries_it_removes(open_log: Callable[..., Log]) -> None:
    log = open_log()
    append(log, data(7, 0))
    marker(log, 7, commit=False)                          # 1
    append(log, data(8, 0))
    cut = marker(log, 8, commit=False)                    # 3
    assert len(read_entries(txn_index_path(log.active_segment))) == 2
    log.truncate_to(cut)
    assert read_entries(txn_index_path(log.active_segment)) == [AbortedTxnEntry(7, 0, 1, 2)]
    assert log.last_stable_offset == 2                    # producer 8's transaction is open again


def test_a_replicated_abort_is_indexed_like_the_leaders(open_log: Callable[..., Log],
                                                        tmp_path: Path) -> None:
    leader = open_log()
    append(leader, data(7, 0, count=2))
    marker(leader, 7, commit=False)
    follower = Log.open(tmp_path / "f-0", LogConfig(), clock_ms=lambda: NOW)
    try:
        follower.append_as_follower(leader.read(0, 1 << 20).records)
        follower.high_watermark = follower.log_end_offset
        assert read_aborted(follower) == read_aborted(leader) == [(7, 0)]
    finally:
        follower.close_without_flush()


def test_appending_a_plain_batch_costs_no_record_decoding(
        open_log: Callable[..., Log], monkeypatch: pytest.MonkeyPatch) -> None:
    """The non-transactional produce path reads headers only (markers are decoded
    where they are appended as a follower, never on a client's produce)."""
    import odradek.protocol.records as records

    log = open_log()

    def refuse(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("a record was decoded")

    monkeypatch.setattr(records, "decode_batch", refuse)
    append(log, bytearray(encode_batch([NewRecord(value=b"x", timestamp=NOW)] * 10)))
    append(log, data(7, 0))
