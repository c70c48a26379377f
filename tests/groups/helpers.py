"""Driving real confluent-kafka consumers in one thread, and watching their assignments."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

SESSION_MS = 6000


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def grow_topic(bootstrap: str, name: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(name, total)])[name].result(15)


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        p.produce(topic, value=f"v{i}".encode(), partition=i % partitions)
    assert p.flush(15) == 0


@dataclass
class Member:
    """A confluent-kafka consumer and what happened to it."""

    name: str
    consumer: Consumer
    assigned: set[int] = field(default_factory=set)
    events: list[tuple[float, str, list[int]]] = field(default_factory=list)
    messages: list[tuple[float, int, int]] = field(default_factory=list)  # (t, partition, offset)

    def on_assign(self, c: Any, parts: list[Any]) -> None:
        ps = [p.partition for p in parts]
        self.events.append((time.monotonic(), "assign", ps))
        if self.consumer_protocol_incremental:
            self.assigned |= set(ps)  # the binding calls incremental_assign for us
        else:
            self.assigned = set(ps)

    def on_revoke(self, c: Any, parts: list[Any]) -> None:
        ps = [p.partition for p in parts]
        self.events.append((time.monotonic(), "revoke", ps))
        if self.consumer_protocol_incremental:
            self.assigned -= set(ps)
        else:
            self.assigned = set()

    cooperative: bool = False
    consumer_protocol_incremental: bool = False

    def poll(self, timeout: float = 0.05) -> None:
        m = self.consumer.poll(timeout)
        if m is not None and m.error() is None:
            self.messages.append((time.monotonic(), m.partition(), m.offset()))

    def close(self) -> None:
        self.consumer.close()


def member(bootstrap: str, group: str, topic: str, name: str, **conf: Any) -> Member:
    config = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
              "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS,
              "heartbeat.interval.ms": 500, "topic.metadata.refresh.interval.ms": 1000,
              "enable.auto.commit": False}
    consumer_protocol = conf.get("group.protocol") == "consumer"
    if consumer_protocol:
        for key in ("session.timeout.ms", "heartbeat.interval.ms",
                    "partition.assignment.strategy"):
            config.pop(key, None)
    config.update(conf)
    cooperative = config.get("partition.assignment.strategy") == "cooperative-sticky"
    m = Member(name, Consumer(config))
    m.cooperative = cooperative
    m.consumer_protocol_incremental = cooperative or consumer_protocol
    m.consumer.subscribe([topic], on_assign=m.on_assign, on_revoke=m.on_revoke)
    return m


def poll_until(members: list[Member], done: Callable[[], bool], timeout: float) -> float:
    """Poll every member until `done()`; returns the seconds it took (fails on timeout)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        for m in members:
            m.poll(0.02)
        if done():
            return time.monotonic() - start
    raise AssertionError(f"not done within {timeout}s: " + "; ".join(
        f"{m.name}={sorted(m.assigned)}" for m in members))


def balanced(members: list[Member], partitions: int) -> Callable[[], bool]:
    """Every partition owned by exactly one member, and no member two more than another."""

    def check() -> bool:
        owned = [m.assigned for m in members]
        flat = [p for s in owned for p in s]
        if sorted(flat) != list(range(partitions)):
            return False
        sizes = [len(s) for s in owned]
        return max(sizes) - min(sizes) <= 1

    return check


def describe_group(bootstrap: str, group: str) -> Any:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(15)
