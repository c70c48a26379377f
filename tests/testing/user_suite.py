"""A user's test file: it knows odradek only through the fixtures its plugin installs.

tests/testing/test_plugin.py runs it with pytester in a throw-away project.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer


def consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 30.0) -> list[bytes]:
    """Read partition 0 from the start, without a group (a cluster that lost a broker
    has no group coordinator while __consumer_offsets lacks its replicas)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        # anything more would be a duplicate
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_kafka_python_on_the_shared_broker(odradek_broker, odradek_topic):
    producer = KafkaProducer(bootstrap_servers=odradek_broker.bootstrap_servers)
    for i in range(5):
        producer.send(odradek_topic, f"v{i}".encode())
    producer.flush(10)
    producer.close()
    consumer = KafkaConsumer(odradek_topic, bootstrap_servers=odradek_broker.bootstrap_servers,
                             auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    got = []
    for record in consumer:
        got.append(record.value)
        if len(got) == 5:
            break
    consumer.close()
    assert sorted(got) == [f"v{i}".encode() for i in range(5)]


@pytest.mark.odradek_config({"num.partitions": 3})
def test_aiokafka_on_a_fresh_broker(odradek_broker_fresh):
    async def roundtrip() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=odradek_broker_fresh.bootstrap_servers)
        await producer.start()
        try:
            for i in range(6):
                await producer.send_and_wait("events", f"e{i}".encode(), partition=i % 3)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("events",
                                    bootstrap_servers=odradek_broker_fresh.bootstrap_servers,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            got = []
            while len(got) < 6:
                batch = await consumer.getmany(timeout_ms=1000)
                got += [r.value for records in batch.values() for r in records]
            return sorted(got)
        finally:
            await consumer.stop()

    assert asyncio.run(roundtrip()) == sorted(f"e{i}".encode() for i in range(6))


def test_retriable_fault_delivers_every_record_once(odradek_broker_fresh):
    broker = odradek_broker_fresh
    broker.create_topic("payments")
    broker.faults.fail("Produce", "NOT_LEADER_OR_FOLLOWER", count=3)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                         "enable.idempotence": True})
    errors = []
    for i in range(20):
        producer.produce("payments", f"p{i}".encode(),
                         on_delivery=lambda err, _msg: err and errors.append(err))
    assert producer.flush(30) == 0
    assert errors == []
    assert len(broker.faults.injected) == 3
    values = consume_all(broker.bootstrap_servers, "payments", 20)
    assert sorted(values) == sorted(f"p{i}".encode() for i in range(20))


def test_fatal_fault_reaches_the_delivery_callback(odradek_broker_fresh):
    broker = odradek_broker_fresh
    broker.create_topic("audit")
    broker.faults.fail("Produce", "TOPIC_AUTHORIZATION_FAILED")
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    reports = []
    producer.produce("audit", b"secret", on_delivery=lambda err, _msg: reports.append(err))
    producer.flush(30)
    assert [e.code() for e in reports] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_leader_kill_under_acks_all_loses_nothing(odradek_cluster):
    cluster = odradek_cluster
    cluster.create_topic("ledger", partitions=1, replication_factor=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True, "log_level": 0})
    acked: list[bytes] = []
    failed = []

    def report(err, msg):
        (failed if err else acked).append(err or msg.value())

    for i in range(50):
        producer.produce("ledger", f"r{i}".encode(), on_delivery=report)
    producer.flush(30)
    leader = cluster.leader("ledger", 0)
    cluster.kill(leader)
    for i in range(50, 100):
        producer.produce("ledger", f"r{i}".encode(), on_delivery=report)
    assert producer.flush(60) == 0
    assert failed == []
    assert cluster.wait_for_leader("ledger", 0, not_on=leader) != leader
    values = consume_all(cluster.bootstrap_servers, "ledger", 100)
    assert sorted(values) == sorted(acked) and len(acked) == 100
