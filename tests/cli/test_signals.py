"""Long-running commands stop on SIGINT and SIGTERM even when started with SIGINT ignored
(as `make test &` starts every child), and stop what they started."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.main import app
from odradek.cli.signals import stop_on_signals
from tests.conftest import BrokerProcess, free_port
from tests.processes import started, stop, wait_for_output

pytestmark = pytest.mark.timeout(180)

ODRADEK = [sys.executable, "-m", "odradek"]

# every command that runs until it is stopped; a group name stands for all its commands
LONG_RUNNING = [("broker",), ("cluster", "up"), ("up",), ("demo", "fleet"),
                ("lake", "ingest"), ("pipeline",), ("lag",), ("health",), ("perf",),
                ("consume",), ("produce",)]
# servers other branches are adding: once a command of that name exists, the same holds
LONG_RUNNING_WHEN_PRESENT = [("console",), ("schema-registry",)]


def commands(typer_app: typer.Typer, prefix: tuple[str, ...] = ()
             ) -> Iterator[tuple[tuple[str, ...], Callable[..., Any]]]:
    for info in typer_app.registered_commands:
        assert info.callback is not None
        name = info.name or info.callback.__name__.replace("_", "-")
        yield (*prefix, name), info.callback
    for group in typer_app.registered_groups:
        assert group.typer_instance is not None and group.name is not None
        yield from commands(group.typer_instance, (*prefix, group.name))


def test_every_long_running_command_installs_its_own_handlers() -> None:
    found = dict(commands(app))
    for wanted in LONG_RUNNING + LONG_RUNNING_WHEN_PRESENT:
        matching = {path: cb for path, cb in found.items() if path[:len(wanted)] == wanted}
        assert matching or wanted in LONG_RUNNING_WHEN_PRESENT, (
            f"no command odradek {' '.join(wanted)}")
        for path, callback in matching.items():
            assert getattr(callback, "stops_on_signals", False), (
                f"odradek {' '.join(path)} runs until stopped: decorate it @long_running")


def test_inside_the_block_sigint_interrupts_even_when_it_was_ignored() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with pytest.raises(KeyboardInterrupt), stop_on_signals():
            signal.raise_signal(signal.SIGINT)
            threading.Event().wait(5)  # handlers run between bytecodes: it never waits
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # restored
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_second_signal_does_not_cut_the_stop_short() -> None:
    stopped = False
    with pytest.raises(KeyboardInterrupt), stop_on_signals():
        try:
            signal.raise_signal(signal.SIGTERM)
        finally:
            signal.raise_signal(signal.SIGINT)  # the impatient second Ctrl-C
            stopped = True
    assert stopped


def create_topic(broker: BrokerProcess, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # held until the answer
    admin.create_topics([NewTopic(name, 1)])[name].result(30)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_broker_started_with_sigint_ignored_stops_on_a_signal(tmp_path: Path,
                                                              sig: int) -> None:
    port = free_port()
    log = tmp_path / "broker.log"
    cmd = [*ODRADEK, "broker", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
           "--override", f"log.dirs={tmp_path / 'data'}"]
    with started(cmd, log, sigint_ignored=True) as proc:
        wait_for_output(proc, log, r"odradek broker \d+ started")
        AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=30)
        assert stop(proc, sig) == 0, log.read_text()[-3000:]
    assert "stopped" in log.read_text()  # cleanly: logs closed, checkpoints written


def test_consume_started_with_sigint_ignored_stops_on_sigint(
        broker: BrokerProcess, topic_name: str, tmp_path: Path) -> None:
    create_topic(broker, topic_name)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic_name, b"first record")
    assert producer.flush(30) == 0
    log = tmp_path / "consume.log"
    with started([*ODRADEK, "consume", topic_name, "--from-beginning", "-b",
                  broker.bootstrap], log, sigint_ignored=True) as proc:
        wait_for_output(proc, log, "first record")  # in its poll loop now
        assert stop(proc, signal.SIGINT) == 130  # as a shell reports an interrupted tool


def test_lag_watch_started_with_sigint_ignored_stops_on_sigint(
        broker: BrokerProcess, topic_name: str, tmp_path: Path) -> None:
    create_topic(broker, topic_name)
    group = f"g-{topic_name}"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(topic_name, 0, 0)], asynchronous=False)
    c.close()
    log = tmp_path / "lag.log"
    with started([*ODRADEK, "lag", group, "--watch", "--interval", "0.2", "-b",
                  broker.bootstrap], log, sigint_ignored=True) as proc:
        wait_for_output(proc, log, f"group {group}")
        assert stop(proc, signal.SIGINT) == 130


def test_demo_fleet_started_with_sigint_ignored_stops_on_sigint(
        broker: BrokerProcess, tmp_path: Path) -> None:
    log = tmp_path / "fleet.log"
    with started([*ODRADEK, "demo", "fleet", "--rate", "100", "-b", broker.bootstrap], log,
                 sigint_ignored=True) as proc:
        wait_for_output(proc, log, r"sent \d+ records")  # sending, past its start-up
        assert stop(proc, signal.SIGINT) == 0
