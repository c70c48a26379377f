"""The flush timer visits only logs appended to since it last found them flushed: an
idle broker's tick costs nothing per partition, and nothing owed is left unflushed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from storage_helpers import Clock, make_batch

from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig
from odradek.storage.manager import LogManager

CLUSTER = "q1Sh-9_ISia_zwGINzRvyQ"


@pytest.fixture
def visited(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The logs each flush_due asked about (Log.flush_target is its question)."""
    calls: list[str] = []
    original = Log.flush_target

    def spy(self: Log, now_ms: int) -> int | None:
        calls.append(f"{self.topic}-{self.partition}")
        return original(self, now_ms)

    monkeypatch.setattr(Log, "flush_target", spy)
    yield calls


def manager(path: Path, clock: Clock, config: LogConfig) -> LogManager:
    m = LogManager([path], node_id=1, cluster_id=CLUSTER, clock_ms=clock, config=config,
                   file_delete_delay_ms=60_000)
    m.startup()
    return m


def test_an_idle_tick_visits_no_log(tmp_path: Path, visited: list[str]) -> None:
    clock = Clock()
    m = manager(tmp_path, clock, LogConfig(segment_bytes=1000))
    logs = [m.create("t", i) for i in range(200)]
    m.flush_due()  # the new logs, once
    visited.clear()
    m.flush_due()
    assert visited == []
    for _ in range(30):  # rolls a segment of t-7
        logs[7].append_as_leader(make_batch([b"x" * 50]), 0)
    logs[9].append_as_leader(make_batch(), 0)
    assert m.flush_due() == 1  # the rolled segment; t-9's record waits (no flush.ms)
    assert sorted(visited) == ["t-7", "t-9"]
    assert logs[7].recovery_point == logs[7].segments[-1].base_offset > 0
    visited.clear()
    m.flush_due()
    assert visited == []
    m.shutdown()


def test_flush_ms_is_honoured_for_a_log_appended_to_once(tmp_path: Path,
                                                         visited: list[str]) -> None:
    clock = Clock()
    m = manager(tmp_path, clock, LogConfig(flush_ms=1000))
    quiet, busy = m.create("t", 0), m.create("t", 1)
    m.flush_due()
    busy.append_as_leader(make_batch(), 0)
    assert m.flush_due() == 0  # not due yet: kept on the list
    clock.now += 1000
    assert m.flush_due() == 1 and busy.recovery_point == 1
    assert quiet.recovery_point == 0 and "t-0" not in visited[2:]
    visited.clear()
    m.flush_due()
    assert visited == []  # flushed: off the list until the next append
    m.shutdown()


def test_deleting_topics_checkpoints_each_dir_once_at_the_next_tick(tmp_path: Path) -> None:
    from odradek.storage.checkpoints import read_offsets

    clock = Clock()
    m = manager(tmp_path, clock, LogConfig())
    for topic in ("a", "b", "c"):
        for i in range(3):
            m.create(topic, i)
    m.checkpoint()
    path = tmp_path.resolve() / "recovery-point-offset-checkpoint"
    written = path.stat().st_ino
    for _ in m.delete_in_steps([("a", i) for i in range(3)]):
        assert m.get("a", 0) is None  # gone from the manager before its dir is renamed
    for _ in m.delete_in_steps([("b", i) for i in range(3)]):
        pass
    assert path.stat().st_ino == written  # not rewritten per topic
    assert m.get("a", 0) is None and not (tmp_path / "a-0").exists()
    m.flush_due()
    assert sorted(read_offsets(path)) == [("c", 0), ("c", 1), ("c", 2)]
    m.shutdown()
