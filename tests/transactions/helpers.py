"""What the transaction tests share: topics, transactional producers, reading a
partition to its end with either isolation level."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int = 1,
                 config: dict[str, str] | None = None) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(15)
    return name


def txn_producer(bootstrap: str, transactional_id: str, **conf: Any) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                  "linger.ms": 1, **conf})
    p.init_transactions(30)
    return p


def produce_in_txn(p: Producer, topic: str, values: list[str], partition: int = 0,
                   commit: bool = True) -> None:
    """One transaction with `values`; flushed before an abort so the records are
    written (librdkafka purges what it has not sent when a transaction aborts)."""
    p.begin_transaction()
    for v in values:
        p.produce(topic, v.encode(), partition=partition)
    if commit:
        p.commit_transaction(30)
    else:
        assert p.flush(30) == 0
        p.abort_transaction(30)


def consumer(bootstrap: str, isolation: str, **conf: Any) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"),
                     "isolation.level": isolation, "enable.auto.commit": False,
                     "enable.partition.eof": True, "fetch.wait.max.ms": 50, **conf})


def read_all(bootstrap: str, topic: str, partition: int = 0,
             isolation: str = READ_COMMITTED, timeout: float = 15.0) -> list[tuple[int, str]]:
    """(offset, value) of every record a consumer of that isolation level gets, from
    the start to the partition's end (the LSO for read_committed)."""
    c = consumer(bootstrap, isolation)
    c.assign([TopicPartition(topic, partition, 0)])
    out: list[tuple[int, str]] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(f"consumer error: {err}")
            value = m.value()
            out.append((m.offset(), value.decode() if value is not None else ""))
    finally:
        c.close()
    raise AssertionError(f"{topic}-{partition} not read to its end in {timeout}s: {out}")


def values(records: list[tuple[int, str]]) -> list[str]:
    return [v for _, v in records]


def end_offsets(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """(last stable offset, high watermark): ListOffsets(latest) at each isolation level."""
    out = []
    for isolation in (READ_COMMITTED, READ_UNCOMMITTED):
        c = consumer(bootstrap, isolation)
        try:
            _, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        finally:
            c.close()
        out.append(high)
    return out[0], out[1]


def wait_for(condition: Any, timeout: float, what: str, interval: float = 0.05) -> float:
    """Seconds until `condition()` held; AssertionError after `timeout`."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if condition():
            return time.monotonic() - start
        time.sleep(interval)
    raise AssertionError(f"{what}: not within {timeout}s")
