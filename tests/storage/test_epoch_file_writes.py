"""Loading a log does not rewrite its leader-epoch-checkpoint when becoming leader puts
back what loading cut (an empty partition's epoch): a restart of thousands of empty
partitions wrote that file twice per partition. What is owed is written at the latest
before the log's data becomes durable, or at the close."""

from __future__ import annotations

from pathlib import Path

from odradek.storage.epochs import LeaderEpochFileCache


def test_loading_then_leading_an_empty_log_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    LeaderEpochFileCache(path).assign(0, 0)
    written = path.stat().st_ino
    loaded = LeaderEpochFileCache(path, sync=False)
    loaded.truncate_from_end(0, write=False)  # the log is empty: epoch 0 starts past it
    assert loaded.entries == []
    loaded.assign(0, 0)  # becoming its leader again, at the same epoch
    loaded.sync()
    assert path.stat().st_ino == written  # not replaced
    assert LeaderEpochFileCache(path).entries == [(0, 0)]


def test_a_cut_not_put_back_is_written_before_data_is_synced(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochFileCache(path)
    cache.assign(0, 0)
    cache.assign(1, 50)
    loaded = LeaderEpochFileCache(path, sync=False)
    loaded.truncate_from_end(50, write=False)  # epoch 1 never got a record
    assert LeaderEpochFileCache(path).entries == [(0, 0), (1, 50)]  # not yet
    loaded.sync()  # as a flush of the log's data does first
    assert LeaderEpochFileCache(path).entries == [(0, 0)]


def test_a_follower_cut_is_written_at_once(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochFileCache(path)
    cache.assign(0, 0)
    cache.assign(1, 50)
    cache.truncate_from_end(40)
    assert LeaderEpochFileCache(path).entries == [(0, 0)]
