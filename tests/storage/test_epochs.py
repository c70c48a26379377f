from pathlib import Path

from odradek.storage.epochs import LeaderEpochFileCache


def test_checkpoint_file_format(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")
    cache.assign(0, 0)
    cache.assign(0, 5)  # same epoch, later offset: no change
    cache.assign(2, 100)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n2 100\n"
    assert LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint").entries == [(0, 0), (2, 100)]


def test_assign_drops_non_monotonic_entries(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")
    cache.assign(1, 10)
    cache.assign(3, 30)
    cache.assign(2, 20)  # epoch 3 at a later offset cannot stand
    assert cache.entries == [(1, 10), (2, 20)]
    cache.assign(4, 15)  # start offset below epoch 2's: epoch 2 goes
    assert cache.entries == [(1, 10), (4, 15)]


def test_end_offset_for(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")
    cache.assign(2, 10)
    cache.assign(4, 25)
    cache.assign(7, 40)
    assert cache.end_offset_for(7, 55) == (7, 55)  # latest: the log end
    assert cache.end_offset_for(4, 55) == (4, 40)
    assert cache.end_offset_for(5, 55) == (4, 40)  # unknown epoch between: floor epoch
    assert cache.end_offset_for(1, 55) == (1, 10)  # below all known
    assert cache.end_offset_for(9, 55) == (-1, -1)
    assert cache.end_offset_for(-1, 55) == (-1, -1)
    assert cache.epoch_for_offset(30) == 4
    assert cache.epoch_for_offset(40) == 7
    assert cache.epoch_for_offset(5) is None


def test_truncation_from_both_ends(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")
    for epoch, offset in [(1, 0), (2, 10), (3, 20), (4, 30)]:
        cache.assign(epoch, offset)
    cache.truncate_from_end(20)
    assert cache.entries == [(1, 0), (2, 10)]
    cache.truncate_from_start(15)
    assert cache.entries == [(2, 15)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n1\n2 15\n"
