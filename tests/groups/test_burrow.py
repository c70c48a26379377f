"""Burrow 1.2.1 (Debian; sarama 1.22, ZooKeeper) reads our `__consumer_offsets` and
reports a group's lag, owners included, as it does against Kafka."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.conftest import BrokerProcess
from tests.groups.burrow import BurrowProcess, burrow_available
from tests.groups.helpers import create_topic, produce, unique
from tests.zk import ZooKeeperProcess, zookeeper  # noqa: F401 - the fixture


@pytest.fixture
def burrow(tmp_path: Path, group_broker: BrokerProcess,
           zookeeper: ZooKeeperProcess) -> Iterator[BurrowProcess]:  # noqa: F811
    if not burrow_available():
        pytest.fail("Burrow is not installed: run scripts/install-system-deps")
    b = BurrowProcess(tmp_path / "burrow", group_broker.bootstrap, zookeeper.connect)
    yield b
    b.stop()


def wait_for(fn: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except OSError as e:  # 404 until Burrow has seen the group
            last = e
        time.sleep(0.5)
    raise AssertionError(f"timed out; last: {last}")


def test_burrow_reports_the_lag_of_a_group(group_broker: BrokerProcess,
                                           burrow: BurrowProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("burrow"), unique("billing")
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, 100, 2)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    consumed = 0
    deadline = time.monotonic() + 20
    while consumed < 60 and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None and m.partition() == 0:
            consumed += 1
            c.commit(m, asynchronous=False)
    # nothing read from partition 1 yet: its committed offset is its start
    c.commit(offsets=[TopicPartition(topic, 1, 0)], asynchronous=False)
    burrow.start()

    def lag_known() -> Any:
        # Burrow calls a partition STOPped once a second has passed (its clock is in
        # whole seconds) since its one commit; evaluated within that second it says
        # STALL: wait for the state, not for time
        status = burrow.lag(group)["status"]
        parts = {p["partition"]: p for p in status["partitions"] if p["topic"] == topic}
        return status if (len(parts) == 2 and parts[1]["current_lag"] == 50
                          and parts[1]["status"] == "STOP") else None

    status = wait_for(lag_known, 60)
    c.close()
    partitions = {p["partition"]: p for p in status["partitions"]}
    print(f"\nBurrow: status {status['status']}, total lag {status['totallag']}, "
          f"partitions {[(p, q['current_lag'], q['status']) for p, q in partitions.items()]}")
    assert partitions[0]["end"]["offset"] <= 50
    assert status["totallag"] == partitions[0]["current_lag"] + 50
    assert partitions[0]["owner"] == "/127.0.0.1"  # from our GroupMetadata record
    # Burrow's rules: partition 0 is caught up; partition 1 has lag and no commits since
    # its only one, so the consumer has stopped on it (STOP), which is an error (ERR)
    assert partitions[0]["status"] == "OK"
    assert partitions[1]["status"] == "STOP"
    assert status["status"] == "ERR"
    committed = Consumer({"bootstrap.servers": bootstrap, "group.id": group}).committed(
        [TopicPartition(topic, 0)], timeout=10)
    assert committed[0].offset == partitions[0]["end"]["offset"]
