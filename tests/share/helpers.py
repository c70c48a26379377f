"""What the share group tests share: topics, group configs, consumers, waiting."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from prometheus_client.parser import text_string_to_metric_families

T = TypeVar("T")


def new_topic(bootstrap: str, partitions: int = 1, replication: int = 1) -> str:
    name = f"share-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, replication)])[name].result(30)
    return name


def set_group_config(bootstrap: str, group: str, name: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def earliest_group(bootstrap: str) -> str:
    """A new share group that starts at the log start (Kafka's default is latest)."""
    group = f"g-{uuid.uuid4().hex[:10]}"
    set_group_config(bootstrap, group, "share.auto.offset.reset", "earliest")
    return group


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for v in values:
        p.produce(topic, value=v.encode())
    assert p.flush(30) == 0


@contextmanager
def share_consumer(bootstrap: str, group: str, topic: str, explicit: bool = True
                   ) -> Iterator[ShareConsumer]:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit" if explicit else "implicit"})
    c.subscribe([topic])
    try:
        yield c
    finally:
        c.close()


def poll_until(consumer: ShareConsumer, done: Callable[[list[Any]], bool],
               on_batch: Callable[[list[Any]], None] | None = None,
               timeout: float = 60.0) -> list[Any]:
    """Poll, handing each batch to `on_batch` (which must acknowledge it in explicit
    mode), until `done(everything so far)`; `timeout` only bounds a hang."""
    seen: list[Any] = []
    deadline = time.monotonic() + timeout
    while not done(seen):
        assert time.monotonic() < deadline, f"not done within {timeout}s: {seen}"
        batch = [m for m in consumer.poll(0.5) if m.error() is None]
        seen.extend(batch)
        if on_batch is not None and batch:
            on_batch(batch)
    return seen


def wait_for(what: Callable[[], T | None], timeout: float = 60.0, message: str = "") -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value:
            return value
        assert time.monotonic() < deadline, message or "condition not reached"
        time.sleep(0.1)


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(metrics_port: int) -> Samples:
    """The broker's Prometheus endpoint: (name, labels) → value (the endpoint starts
    just after the broker's listeners: a refused connection is tried again)."""
    url = f"http://127.0.0.1:{metrics_port}/metrics"

    def read() -> str | None:
        try:
            return str(urllib.request.urlopen(url, timeout=5).read().decode())
        except ConnectionRefusedError:
            return None
        except urllib.error.URLError as e:
            if isinstance(e.reason, ConnectionRefusedError):
                return None
            raise

    text = wait_for(read, 30, "the metrics endpoint did not start")
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def metric(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)
