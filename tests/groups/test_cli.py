"""`odradek groups` and `odradek lag` against a real broker and group."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from typer.testing import CliRunner

from odradek.cli import groups, lag
from odradek.client.lag import Sample, evaluate_partition, group_status
from tests.conftest import BrokerProcess
from tests.groups.helpers import create_topic, member, poll_until, produce, unique

runner = CliRunner()


def committed(bootstrap: str, group: str, topic: str) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    out = [tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(2)], 10)]
    c.close()
    return out


def test_describe_reset_lag_and_delete(group_broker: BrokerProcess,
                                       tmp_path: Path) -> None:
    b = group_broker.bootstrap
    topic, group = unique("cli"), unique("g")
    create_topic(b, topic, 2)
    produce(b, topic, 20, 2)
    c = member(b, group, topic, "cli-client")
    poll_until([c], lambda: len(c.messages) >= 20, 20)
    c.consumer.commit(offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 10)],
                      asynchronous=False)

    out = runner.invoke(groups.app, ["describe", group, "-b", b], terminal_width=250)
    assert out.exit_code == 0, out.output
    header = out.output.splitlines()[0].split()
    assert header == list(groups.COLUMNS)
    row0 = next(line.split() for line in out.output.splitlines() if f"{topic} 0 " in
                " ".join(line.split()) + " ")
    assert row0[:6] == [group, topic, "0", "4", "10", "6"]
    assert "cli-client" in row0 and "/127.0.0.1" in row0

    refused = runner.invoke(groups.app, ["reset-offsets", group, "--topic", topic,
                                         "--to-earliest", "--execute", "-b", b])
    assert refused.exit_code != 0 and "inactive" in refused.output
    c.close()

    listed = runner.invoke(groups.app, ["list", "--state", "-b", b])
    assert group in listed.output and "Empty" in listed.output

    dry = runner.invoke(groups.app, ["reset-offsets", group, "--topic", topic, "--shift-by",
                                     "-2", "-b", b])
    assert dry.exit_code == 0 and "dry run" in dry.output
    assert committed(b, group, topic) == [4, 10]
    done = runner.invoke(groups.app, ["reset-offsets", group, "--topic", f"{topic}:0",
                                      "--to-offset", "1", "--execute", "-b", b])
    assert done.exit_code == 0, done.output
    assert committed(b, group, topic) == [1, 10]
    runner.invoke(groups.app, ["reset-offsets", group, "--topic", topic, "--to-latest",
                               "--execute", "-b", b])
    assert committed(b, group, topic) == [10, 10]
    runner.invoke(groups.app, ["reset-offsets", group, "--all-topics", "--to-datetime",
                               "2000-01-01T00:00:00", "--execute", "-b", b])
    assert committed(b, group, topic) == [0, 0]
    runner.invoke(groups.app, ["reset-offsets", group, "--all-topics", "--by-duration",
                               "PT1H", "--execute", "-b", b])
    assert committed(b, group, topic) == [0, 0]  # everything is younger than an hour
    plan = tmp_path / "offsets.csv"
    plan.write_text(f"{topic},0,3\n{topic},1,99\n")
    runner.invoke(groups.app, ["reset-offsets", group, "--from-file", str(plan),
                               "--execute", "-b", b])
    assert committed(b, group, topic) == [3, 10]  # 99 is past the log end: clamped
    runner.invoke(groups.app, ["reset-offsets", group, "--all-topics", "--to-earliest",
                               "--execute", "-b", b])

    evaluated = runner.invoke(lag.app, [group, "--samples", "2", "--interval", "0.2", "-b", b])
    assert "total lag 20" in evaluated.output and "STOP" in evaluated.output
    assert evaluated.exit_code == 2  # ERR: nobody consumes and the lag stays

    gone = runner.invoke(groups.app, ["delete-offsets", group, "--topic", topic, "-b", b])
    assert gone.exit_code == 0, gone.output
    assert committed(b, group, topic) == [-1001, -1001]
    deleted = runner.invoke(groups.app, ["delete", group, "-b", b])
    assert deleted.exit_code == 0 and "successful" in deleted.output


def test_burrow_rules() -> None:
    def window(*pairs: tuple[int, int]) -> list[Sample]:
        return [Sample(float(i), offset, end) for i, (offset, end) in enumerate(pairs)]

    assert evaluate_partition(window((5, 10), (10, 10))) == "OK"  # caught up once
    assert evaluate_partition(window((5, 10), (4, 10))) == "REWIND"
    assert evaluate_partition(window((5, 10), (5, 12)), has_members=False) == "STOP"
    assert evaluate_partition(window((5, 10), (5, 12)), has_members=True) == "STALL"
    assert evaluate_partition(window((5, 10), (6, 13), (7, 20))) == "WARN"
    assert evaluate_partition(window((5, 10), (8, 12), (9, 12))) == "OK"
    assert evaluate_partition(window((None, 10))) == "ERR"  # type: ignore[arg-type]
    assert group_status(["OK", "WARN"]) == "WARN"
    assert group_status(["OK", "STALL"]) == "ERR"
    assert group_status(["OK", "OK"]) == "OK"


def test_lag_watch_keeps_printing(group_broker: BrokerProcess) -> None:
    b = group_broker.bootstrap
    topic, group = unique("watch"), unique("g")
    create_topic(b, topic, 1)
    produce(b, topic, 5, 1)
    c = Consumer({"bootstrap.servers": b, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    c.close()
    code = ("import sys; from odradek.cli.lag import app; "
            "sys.argv = ['lag', sys.argv[1], '--watch', '--interval', '0.3', '-b', sys.argv[2]]; "
            "app()")
    proc = subprocess.Popen([sys.executable, "-c", code, group, b], stdout=subprocess.PIPE,
                            text=True)
    try:
        lines = [proc.stdout.readline() for _ in range(6)] if proc.stdout else []
    finally:
        proc.kill()
        proc.wait(5)
    reports = [line for line in lines if line.startswith(f"group {group}")]
    assert len(reports) >= 2 and all("total lag 3" in r for r in reports)
