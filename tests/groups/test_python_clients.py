"""Classic groups with kafka-python 3.0 and aiokafka 0.14: their own assignors run in
the leader, the broker relays; commits resume where they left off."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.coordinator.assignors.range import RangePartitionAssignor as AioRange
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as AioRR
from aiokafka.coordinator.assignors.sticky.sticky_assignor import (
    StickyPartitionAssignor as AioSticky,
)
from kafka import KafkaConsumer
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

from tests.conftest import BrokerProcess
from tests.groups.helpers import create_topic, produce, unique

KAFKA_PYTHON_ASSIGNORS = {
    "range": RangePartitionAssignor,
    "roundrobin": RoundRobinPartitionAssignor,
    "sticky": StickyPartitionAssignor,
}


def kp_consumer(bootstrap: str, group: str, topic: str, assignor: type) -> KafkaConsumer:
    return KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                         partition_assignment_strategy=[assignor],
                         session_timeout_ms=6000, heartbeat_interval_ms=500,
                         auto_offset_reset="earliest", enable_auto_commit=False,
                         metadata_max_age_ms=1000)


class Polling:
    """A kafka-python consumer polled in its own thread, as applications run them (one
    thread polling several consumers with short timeouts abandons their joins)."""

    def __init__(self, consumer: KafkaConsumer) -> None:
        self.consumer = consumer
        self.assigned: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(timeout_ms=200)
            self.assigned = {tp.partition for tp in self.consumer.assignment()}

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def settle(members: list[Polling], partitions: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sets = [m.assigned for m in members]
        flat = sorted(p for s in sets for p in s)
        if flat == list(range(partitions)) and max(map(len, sets)) - min(map(len, sets)) <= 1:
            return
        time.sleep(0.05)
    raise AssertionError(f"not balanced: {[m.assigned for m in members]}")


@pytest.mark.parametrize("assignor", sorted(KAFKA_PYTHON_ASSIGNORS))
def test_kafka_python_three_consumers_share_a_topic(group_broker: BrokerProcess,
                                                    assignor: str) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("kp"), unique("g")
    create_topic(bootstrap, topic, 6)
    cls = KAFKA_PYTHON_ASSIGNORS[assignor]
    members = [Polling(kp_consumer(bootstrap, group, topic, cls)) for _ in range(3)]
    settle(members, 6)
    members.append(Polling(kp_consumer(bootstrap, group, topic, cls)))
    settle(members, 6)
    members.pop(0).close()
    settle(members, 6)
    for m in members:
        m.close()


def test_kafka_python_commit_resumes(group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("kp-resume"), unique("g")
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, 20, 2)
    c = kp_consumer(bootstrap, group, topic, RangePartitionAssignor)
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + 20
    while len(got) < 20 and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=200).values():
            got.extend((r.partition, r.offset) for r in records)
    c.commit()
    c.close()
    produce(bootstrap, topic, 2, 2)
    c = kp_consumer(bootstrap, group, topic, RangePartitionAssignor)
    more: list[tuple[int, int]] = []
    deadline = time.monotonic() + 20
    while len(more) < 2 and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=200).values():
            more.extend((r.partition, r.offset) for r in records)
    c.close()
    assert sorted(more) == [(0, 10), (1, 10)]


AIOKAFKA_ASSIGNORS = {"range": AioRange, "roundrobin": AioRR, "sticky": AioSticky}


@pytest.mark.parametrize("assignor", sorted(AIOKAFKA_ASSIGNORS))
def test_aiokafka_three_members_share_and_commit(group_broker: BrokerProcess,
                                                 assignor: str) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("aio"), unique("g")
    create_topic(bootstrap, topic, 6)
    produce(bootstrap, topic, 60, 6)

    async def run() -> tuple[list[set[int]], int]:
        consumers = [AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                      partition_assignment_strategy=(
                                          AIOKAFKA_ASSIGNORS[assignor],),
                                      session_timeout_ms=6000, heartbeat_interval_ms=500,
                                      auto_offset_reset="earliest", enable_auto_commit=False)
                     for _ in range(3)]
        for c in consumers:
            await c.start()
        seen = 0
        deadline = time.monotonic() + 30
        sets: list[set[int]] = []
        while time.monotonic() < deadline:
            for c in consumers:
                batch = await c.getmany(timeout_ms=100)
                seen += sum(len(v) for v in batch.values())
            sets = [{tp.partition for tp in c.assignment()} for c in consumers]
            if seen >= 60 and sorted(p for s in sets for p in s) == list(range(6)) \
                    and all(len(s) == 2 for s in sets):
                break
        for c in consumers:
            await c.commit()
            await c.stop()
        check = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
        await check.start()
        from aiokafka import TopicPartition
        total = 0
        for p in range(6):
            total += await check.committed(TopicPartition(topic, p)) or 0
        await check.stop()
        return sets, total

    sets, committed = asyncio.run(run())
    assert sorted(p for s in sets for p in s) == list(range(6))
    assert all(len(s) == 2 for s in sets)
    assert committed == 60
