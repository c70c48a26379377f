"""LogManager: log dirs, meta.properties, placement, checkpoints, clean shutdown."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from storage_helpers import Clock, make_batch

from odradek.storage.checkpoints import (
    MetaProperties,
    read_meta_properties,
    read_offsets,
    read_partition_metadata,
    write_meta_properties,
)
from odradek.storage.log_config import LogConfig
from odradek.storage.manager import LogDirError, LogManager
from odradek.storage.segment import LogSegment

CLUSTER = "q1Sh-9_ISia_zwGINzRvyQ"


@pytest.fixture
def dirs(tmp_path: Path) -> list[Path]:
    return [tmp_path / "d1", tmp_path / "d2", tmp_path / "d3"]


@pytest.fixture
def recover_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    calls: list[int] = []
    original = LogSegment.recover

    def spy(self: LogSegment, *args: object, **kwargs: object) -> int:
        calls.append(self.base_offset)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogSegment, "recover", spy)
    yield calls


def manager(dirs: list[Path], clock: Clock | None = None, **kwargs: object) -> LogManager:
    m = LogManager(
        dirs, node_id=1, cluster_id=CLUSTER, clock_ms=clock or Clock(), **kwargs  # type: ignore[arg-type]
    )
    m.startup()
    return m


def test_first_start_writes_meta_properties(dirs: list[Path]) -> None:
    manager(dirs).shutdown()
    metas = [read_meta_properties(d / "meta.properties") for d in dirs]
    assert all(m is not None and (m.version, m.node_id, m.cluster_id) == (1, 1, CLUSTER)
               for m in metas)
    assert len({m.directory_id for m in metas if m is not None}) == 3
    manager(dirs).shutdown()  # and accepts them on the next start
    assert [read_meta_properties(d / "meta.properties") for d in dirs] == metas


def test_another_nodes_or_clusters_dir_is_refused(dirs: list[Path]) -> None:
    dirs[1].mkdir(parents=True)
    write_meta_properties(dirs[1] / "meta.properties", MetaProperties(1, CLUSTER, 2, "x"))
    with pytest.raises(LogDirError, match="node 2"):
        manager(dirs)
    write_meta_properties(dirs[1] / "meta.properties", MetaProperties(0, "other", 1))
    with pytest.raises(LogDirError, match="cluster other"):
        manager(dirs)


def test_partitions_go_to_the_emptiest_dir(dirs: list[Path]) -> None:
    m = manager(dirs)
    topic_id = "AAECAwQFBgcICQoLDA0ODw"
    for p in range(6):
        m.create("orders", p, topic_id=topic_id)
    counts = {d: len([e for e in os.listdir(d) if e.startswith("orders-")]) for d in dirs}
    assert set(counts.values()) == {2}
    log = m.get("orders", 4)
    assert log is not None and read_partition_metadata(log.directory) == topic_id
    assert m.create("orders", 4) is log
    m.shutdown()


def test_a_new_partition_has_kafkas_files_and_a_leftover_dir_is_read_not_assumed_empty(
    dirs: list[Path],
) -> None:
    """A partition made now skips the listing and the temporary files (CreateTopics
    makes thousands); a dir already there (a crash between its mkdir and the metadata
    commit, or a failed open) is opened like any other, its records kept."""
    m = manager(dirs[:1])
    topic_id = "AAECAwQFBgcICQoLDA0ODw"
    fresh = m.create("fresh", 0, topic_id=topic_id)
    fresh.leader_epochs.assign(0, 0)
    assert sorted(os.listdir(fresh.directory)) == [
        "00000000000000000000.index", "00000000000000000000.log",
        "00000000000000000000.timeindex", "leader-epoch-checkpoint", "partition.metadata"]
    assert read_partition_metadata(fresh.directory) == topic_id
    assert (fresh.directory / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    fresh.leader_epochs.assign(3, 0)  # the next write replaces the file atomically
    assert (fresh.directory / "leader-epoch-checkpoint").read_text() == "0\n1\n3 0\n"

    old = m.create("old", 0)
    old.append_as_leader(make_batch([b"a", b"b"]), 0)
    old.flush()
    # a dir the manager has not opened, with records in it
    shutil.copytree(old.directory, dirs[0] / "left-0")
    reopened = m.create("left", 0, topic_id=topic_id)
    assert reopened.log_end_offset == 2
    assert read_partition_metadata(reopened.directory) == topic_id
    m.shutdown()


def test_checkpoints_hold_recovery_points_log_starts_and_high_watermarks(
    dirs: list[Path],
) -> None:
    m = manager(dirs[:1])
    log = m.create("t", 0)
    for _ in range(5):
        log.append_as_leader(make_batch(), 0)
    log.flush()
    log.high_watermark = 4
    log.increment_log_start_offset(2)
    m.create("u", 3)
    m.checkpoint()
    d = dirs[0]
    assert (d / "recovery-point-offset-checkpoint").read_text() == "0\n2\nt 0 5\nu 3 0\n"
    assert (d / "replication-offset-checkpoint").read_text() == "0\n2\nt 0 4\nu 3 0\n"
    assert (d / "log-start-offset-checkpoint").read_text() == "0\n1\nt 0 2\n"
    m.shutdown()
    again = manager(dirs[:1])
    reloaded = again.get("t", 0)
    assert reloaded is not None
    assert (reloaded.log_start_offset, reloaded.high_watermark) == (2, 4)
    again.shutdown()


def test_clean_shutdown_marker_skips_recovery(dirs: list[Path], recover_calls: list[int]) -> None:
    m = manager(dirs)
    for p in range(3):
        log = m.create("t", p)
        for _ in range(10):
            log.append_as_leader(make_batch(), 0)
    m.shutdown()
    assert all((d / ".kafka_cleanshutdown").exists() for d in dirs)
    again = manager(dirs)
    assert recover_calls == []
    assert all(again.had_clean_shutdown.values())
    assert not any((d / ".kafka_cleanshutdown").exists() for d in dirs)
    assert sorted(lg.log_end_offset for lg in again.all_logs()) == [10, 10, 10]
    again.shutdown()


def test_crash_recovers_from_the_checkpointed_recovery_point(
    dirs: list[Path], recover_calls: list[int]
) -> None:
    config = LogConfig(segment_bytes=1000)
    m = manager(dirs[:1], config=config)
    log = m.create("t", 0)
    for _ in range(60):
        log.append_as_leader(make_batch([b"x" * 50]), 0)
    bases = [s.base_offset for s in log.segments]
    assert m.flush_due() == 1  # rolled segments get flushed
    assert log.recovery_point == bases[-1]
    m.checkpoint()
    for lg in m.all_logs():
        lg.close_without_flush()  # kill -9
    again = manager(dirs[:1], config=config)
    assert recover_calls == [bases[-1]]
    assert again.had_clean_shutdown == {dirs[0].resolve(): False}
    reloaded = again.get("t", 0)
    assert reloaded is not None and reloaded.log_end_offset == 60
    again.shutdown()


def test_delete_renames_then_purges(dirs: list[Path]) -> None:
    clock = Clock()
    m = manager(dirs[:1], clock=clock, file_delete_delay_ms=1000)
    m.create("gone", 0).append_as_leader(make_batch(), 0)
    renamed = m.delete("gone", 0)
    assert renamed is not None and renamed.exists()
    assert renamed.name.startswith("gone-0.") and renamed.name.endswith("-delete")
    assert len(renamed.name) == len("gone-0.") + 32 + len("-delete")
    assert m.get("gone", 0) is None
    assert m.purge_deleted() == 0
    clock.now += 1000
    assert m.purge_deleted() == 1 and not renamed.exists()
    m.create("gone2", 0)
    renamed = m.delete("gone2", 0)
    m.shutdown()
    assert renamed is not None and renamed.exists()
    manager(dirs[:1]).shutdown()  # leftover -delete dirs go at startup
    assert not renamed.exists()


def test_a_partition_deleted_in_steps_can_be_created_again_before_its_step(
        dirs: list[Path]) -> None:
    m = manager(dirs[:1])
    for i in range(3):
        m.create("again", i).append_as_leader(make_batch(), 0)
    steps = m.delete_in_steps([("again", i) for i in range(3)])
    assert m.get("again", 0) is None  # gone before any step ran
    fresh = m.create("again", 0)  # renames the old dir first
    assert fresh.log_end_offset == 0
    for _ in steps:
        pass
    m.sync_deleted()
    deleted = sorted(p.name for p in dirs[0].iterdir() if p.name.endswith("-delete"))
    assert [n.split(".")[0] for n in deleted] == ["again-0", "again-1", "again-2"]
    assert m.get("again", 0) is fresh and fresh.log_end_offset == 0
    m.shutdown()


def test_a_stop_during_a_delete_in_steps_renames_the_rest(dirs: list[Path]) -> None:
    m = manager(dirs[:1])
    for i in range(4):
        m.create("stopped", i).append_as_leader(make_batch(), 0)
    steps = m.delete_in_steps([("stopped", i) for i in range(4)])
    next(steps)  # one renamed, three left when the broker stops
    m.shutdown()
    names = [p.name for p in dirs[0].iterdir() if p.name.startswith("stopped")]
    assert len(names) == 4 and all(n.endswith("-delete") for n in names)
    again = manager(dirs[:1])  # the next start removes them
    assert not [p for p in dirs[0].iterdir() if p.name.startswith("stopped")]
    assert again.get("stopped", 0) is None
    again.shutdown()


def test_flush_due_honours_flush_ms(dirs: list[Path]) -> None:
    clock = Clock()
    m = manager(dirs[:1], clock=clock, config=LogConfig(flush_ms=1000))
    log = m.create("t", 0)
    log.append_as_leader(make_batch(), 0)
    assert m.flush_due() == 0
    clock.now += 1000
    assert m.flush_due() == 1 and log.recovery_point == 1
    m.shutdown()


def test_config_per_topic_and_several_recovery_threads(dirs: list[Path]) -> None:
    configs = {"small": LogConfig(segment_bytes=500)}
    m = manager(dirs, config=lambda t: configs.get(t, LogConfig()), recovery_threads_per_dir=4)
    for p in range(8):
        m.create("small", p).append_as_leader(make_batch([b"s" * 300]), 0)
    m.shutdown()
    again = manager(
        dirs, config=lambda t: configs.get(t, LogConfig()), recovery_threads_per_dir=4
    )
    logs = again.all_logs()
    assert len(logs) == 8 and all(lg.config.segment_bytes == 500 for lg in logs)
    usage = again.dir_usage()
    assert sum(len(u.partitions) for u in usage) == 8
    assert all(u.total_bytes > 0 and u.usable_bytes > 0 for u in usage)
    assert sum(sum(u.partitions.values()) for u in usage) == sum(lg.size_in_bytes for lg in logs)
    again.shutdown()


def test_unknown_dirs_are_skipped_and_duplicates_refused(dirs: list[Path]) -> None:
    m = manager(dirs[:2])
    m.create("t", 0)
    m.shutdown()
    (dirs[0] / "lost+found").mkdir()
    (dirs[0] / "t-0.0123456789abcdef0123456789abcdef-future").mkdir()
    again = manager(dirs[:2])
    assert [(lg.topic, lg.partition) for lg in again.all_logs()] == [("t", 0)]
    again.shutdown()
    holder = next(d for d in dirs[:2] if (d / "t-0").exists())
    other = dirs[1] if holder == dirs[0] else dirs[0]
    (other / "t-0").mkdir()
    with pytest.raises(LogDirError, match="both"):
        manager(dirs[:2])
    assert read_offsets(holder / "recovery-point-offset-checkpoint") == {("t", 0): 0}


def test_a_partition_dir_vanishing_during_start_up_is_left_out_with_one_line(
        dirs: list[Path], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    import shutil

    m = manager(dirs[:1])
    for p in range(3):
        m.create("t", p).append_as_leader(make_batch([b"a", b"b"]), 0)
    m.shutdown()
    original = LogManager.open_log

    def vanishing(self: LogManager, path: Path, *args: object, **kwargs: object) -> object:
        if path.name == "t-1":
            shutil.rmtree(path)  # another program removes it while the broker loads
        return original(self, path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogManager, "open_log", vanishing)
    with caplog.at_level("WARNING", logger="odradek.storage.manager"):
        again = manager(dirs[:1])
    assert sorted(lg.partition for lg in again.all_logs()) == [0, 2]
    assert not again.offline_dirs  # the rest of the dir is served
    assert again.get("t", 0).log_end_offset == 2  # type: ignore[union-attr]
    vanished = [r for r in caplog.records if "vanished" in r.getMessage()]
    assert len(vanished) == 1 and "t-1" in vanished[0].getMessage()
    assert again.log_dir_of("t", 1) is None
    again.shutdown()


def test_more_segments_than_the_descriptor_budget_stay_readable(
        dirs: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from odradek.storage import file_handles

    pool = file_handles.FileHandles(16)
    monkeypatch.setattr(file_handles, "HANDLES", pool)
    m = manager(dirs[:1])
    logs = [m.create("t", p) for p in range(60)]
    for _ in range(3):
        for lg in logs:
            lg.append_as_leader(make_batch(), 0)
        assert pool.open_count <= 16
    m.shutdown()
    again = manager(dirs[:1])
    for lg in again.all_logs():
        assert lg.log_end_offset == 3
        assert len(lg.read(0, 1 << 20).records) > 0
    assert pool.open_count <= 16 and pool.evicted > 0
    again.shutdown()


def test_logs_created_at_run_time_leave_the_collectors_sight_by_the_thousand(
        dirs: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The collector's full passes walk every object it tracks: a broker that grew to
    10,000 partitions at run time paused 200 to 800 ms on each. Every FREEZE_AFTER_LOGS
    logs created, the heap is frozen (as after a start-up that loaded that many)."""
    import gc

    import odradek.storage.manager as manager_module

    monkeypatch.setattr(manager_module, "FREEZE_AFTER_LOGS", 25)
    m = manager(dirs)
    gc.unfreeze()
    try:
        for p in range(24):
            m.create("grows", p)
        assert gc.get_freeze_count() == 0  # not yet: a small broker is left alone
        m.create("grows", 24)
        frozen = gc.get_freeze_count()
        assert frozen > 0
        log3 = m.get("grows", 3)
        assert not any(o is log3 for o in gc.get_objects())  # out of the collector's sight
        for p in range(25, 49):
            m.create("grows", p)
        assert gc.get_freeze_count() == frozen  # the next 25 are not there yet
    finally:
        gc.unfreeze()
        m.shutdown()
