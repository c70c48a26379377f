import struct
from pathlib import Path

import crc32c
import pytest

from odradek.protocol.errors import InvalidProducerEpoch, OutOfOrderSequence
from odradek.storage.producer_state import (
    INT32_MAX,
    AppendOrigin,
    CorruptSnapshot,
    ProducerStateManager,
    read_snapshot,
)


def append(
    psm: ProducerStateManager, pid: int, epoch: int, first_seq: int, count: int, offset: int,
    ts: int = 1000, origin: AppendOrigin = AppendOrigin.CLIENT,
) -> None:
    info = psm.prepare_update(pid, origin)
    last_seq = (first_seq + count - 1) % (INT32_MAX + 1)
    info.append_data_batch(epoch, first_seq, last_seq, ts, offset, offset + count - 1, False)
    psm.update(info)


def test_duplicate_of_any_of_the_last_five_batches(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    for i in range(7):
        append(psm, 1, 0, i * 2, 2, offset=100 + i * 2)
    entry = psm.last_entry(1)
    assert entry is not None and len(entry.batches) == 5
    dup = entry.find_duplicate(0, 6, 7)
    assert dup is not None and (dup.first_offset, dup.last_offset) == (106, 107)
    assert entry.find_duplicate(0, 2, 3) is None  # sixth from the end: forgotten
    assert entry.find_duplicate(1, 6, 7) is None  # other epoch
    assert entry.find_duplicate(0, 6, 6) is None  # other range


def test_sequence_gap_is_out_of_order(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    append(psm, 1, 0, 0, 3, offset=0)
    with pytest.raises(OutOfOrderSequence):
        append(psm, 1, 0, 4, 1, offset=3)
    append(psm, 1, 0, 3, 1, offset=3)


def test_stale_epoch_and_new_epoch_rules(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    append(psm, 1, 5, 0, 1, offset=0)
    with pytest.raises(InvalidProducerEpoch):
        append(psm, 1, 4, 1, 1, offset=1)
    with pytest.raises(OutOfOrderSequence):
        append(psm, 1, 6, 7, 1, offset=1)  # a new epoch starts at 0
    append(psm, 1, 6, 0, 1, offset=1)
    entry = psm.last_entry(1)
    assert entry is not None and entry.producer_epoch == 6 and len(entry.batches) == 1


def test_unknown_producer_accepts_any_sequence(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    append(psm, 9, 3, 12345, 2, offset=0)
    append(psm, 9, 3, 12347, 1, offset=2)


def test_sequence_wraps_at_int32(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    append(psm, 1, 0, INT32_MAX - 1, 2, offset=0)
    entry = psm.last_entry(1)
    assert entry is not None and entry.last_seq == INT32_MAX
    append(psm, 1, 0, 0, 1, offset=2)
    # a batch straddling the wrap has first seq INT32_MAX and last seq 1
    append(psm, 1, 0, 1, 1, offset=3)


def test_replication_origin_skips_sequence_checks(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    append(psm, 1, 2, 0, 1, offset=0)
    append(psm, 1, 2, 10, 1, offset=1, origin=AppendOrigin.REPLICATION)
    append(psm, 1, 1, 0, 1, offset=2, origin=AppendOrigin.REPLICATION)  # warns only


def test_expiration_by_last_batch_timestamp(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, producer_id_expiration_ms=1000)
    append(psm, 1, 0, 0, 1, offset=0, ts=5000)
    append(psm, 2, 0, 0, 1, offset=1, ts=5500)
    assert psm.remove_expired_producers(6000) == 1
    assert psm.last_entry(1) is None and psm.last_entry(2) is not None


def test_snapshot_is_kafkas_format_v1(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    append(psm, 77, 3, 10, 4, offset=200, ts=1234)
    psm.update_map_end_offset(204)
    path = psm.take_snapshot()
    assert path is not None and path.name == "00000000000000000204.snapshot"
    raw = path.read_bytes()
    entry = struct.pack(">qhiqiqiq", 77, 3, 13, 203, 3, 1234, -1, -1)
    body = struct.pack(">i", 1) + entry
    assert raw == struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    (loaded,) = read_snapshot(path)
    assert (loaded.producer_id, loaded.producer_epoch, loaded.last_seq) == (77, 3, 13)
    assert loaded.batches[0].first_offset == 200 and loaded.batches[0].first_seq == 10


def test_corrupt_snapshot_is_skipped_for_an_older_one(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    append(psm, 1, 0, 0, 1, offset=0)
    psm.update_map_end_offset(1)
    psm.take_snapshot()
    append(psm, 1, 0, 1, 1, offset=1)
    psm.update_map_end_offset(2)
    newest = psm.take_snapshot()
    assert newest is not None
    newest.write_bytes(newest.read_bytes()[:-1] + b"\x7f")
    with pytest.raises(CorruptSnapshot):
        read_snapshot(newest)
    fresh = ProducerStateManager(tmp_path)
    fresh.truncate_and_reload(0, 10, now_ms=1000)
    assert fresh.map_end_offset == 1
    entry = fresh.last_entry(1)
    assert entry is not None and entry.last_seq == 0
    assert not newest.exists()
