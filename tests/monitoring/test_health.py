"""`odradek health` against a real broker: a caught-up group is healthy (exit 0), a
group that stopped with lag behind it is an alarm (exit 1)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import typer
from confluent_kafka import TopicPartition
from typer.testing import CliRunner

from odradek.cli import health
from tests.conftest import BrokerProcess
from tests.groups.helpers import create_topic, member, poll_until, produce, unique

runner = CliRunner()
app = typer.Typer()
app.command()(health.health)


def run_health(bootstrap: str, *args: str) -> Any:
    return runner.invoke(app, ["-b", bootstrap, "--samples", "2", "--interval", "0.3", *args],
                         terminal_width=200)


@pytest.fixture
def group_broker(tmp_path: Any) -> Any:
    b = BrokerProcess(tmp_path / "data",
                      overrides={"group.initial.rebalance.delay.ms": "100"}).start()
    yield b
    b.stop()


def consume(bootstrap: str, topic: str, group: str, count: int, commit: list[int] | None
            ) -> None:
    """Read `count` records as a member of `group`, commit, and leave the group."""
    m = member(bootstrap, group, topic, "health-test")
    poll_until([m], lambda: len(m.messages) >= count, 20)
    if commit is None:
        m.consumer.commit(asynchronous=False)
    else:
        m.consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in enumerate(commit)],
                          asynchronous=False)
    m.close()


def test_a_caught_up_cluster_is_healthy(group_broker: BrokerProcess) -> None:
    b, topic, group = group_broker.bootstrap, unique("ok"), unique("g")
    create_topic(b, topic, 2)
    produce(b, topic, 10, 2)
    consume(b, topic, group, 10, commit=[5, 5])
    out = run_health(b)
    assert out.exit_code == 0, out.output
    assert "healthy: no alarm" in out.output
    assert "controller 1" in out.output and "0 offline" in out.output
    row = next(line.split() for line in out.output.splitlines() if line.startswith(group))
    assert row[1:] == ["Empty", "0", "0", "0", "OK"]
    dirs = out.output[out.output.index("LOG DIR"):]
    assert "online" in dirs and "%" in dirs, "each log dir with its disk use"


def test_a_stopped_group_with_lag_is_an_alarm_and_exits_non_zero(
        group_broker: BrokerProcess) -> None:
    b, topic, group = group_broker.bootstrap, unique("lagging"), unique("g")
    create_topic(b, topic, 2)
    produce(b, topic, 40, 2)
    consume(b, topic, group, 40, commit=[3, 7])  # 17 + 13 behind, then nobody consumes
    out = run_health(b, "--max-lag", "10")
    assert out.exit_code == 1, out.output
    row = next(line.split() for line in out.output.splitlines() if line.startswith(group))
    assert row[1:] == ["Empty", "0", "30", "17", "ERR"]
    alarms = [line for line in out.output.splitlines() if line.startswith("ALARM")]
    assert f"ALARM group {group}: lag 30 > 10" in alarms
    assert any(f"group {group}: status ERR (STOP)" in a for a in alarms)
    # without a lag limit Burrow's STOP alone still fails the check
    assert run_health(b).exit_code == 1
    # and a disk threshold of 0% makes the log dir an alarm too
    full = run_health(b, "--max-disk-used-pct", "0")
    assert any("% full (> 0%)" in line for line in full.output.splitlines())


def test_an_unreachable_cluster_exits_2() -> None:
    from tests.conftest import free_port

    out = runner.invoke(app, ["-b", f"127.0.0.1:{free_port()}", "--samples", "1",
                              "--timeout", "2"], terminal_width=200)
    assert out.exit_code == 2


def test_watch_refreshes_until_interrupted(group_broker: BrokerProcess,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    real_sleep, watching = time.sleep, threading.current_thread()

    def sleep(seconds: float) -> None:
        # time.sleep is the time module's, seen by every thread of this process: another
        # test's thread still running here (py4j's worker after a Spark test) took the
        # interrupt, and the watch then looped without end
        if threading.current_thread() is not watching:
            real_sleep(seconds)
            return
        sleeps.append(seconds)
        if len(sleeps) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(health.time, "sleep", sleep)
    out = runner.invoke(app, ["-b", group_broker.bootstrap, "--watch", "--interval", "0.5"],
                        terminal_width=200)
    assert out.exit_code == 130
    assert sleeps == [0.5, 0.5]
    assert "controller 1" in out.output
