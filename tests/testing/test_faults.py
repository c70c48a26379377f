"""Injected faults: names checked, and what clients see (errors, delays, disconnects,
faults on one topic). The error responses are the pipeline's own
(server/error_responses.py, tested in tests/server)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaProducer

from odradek.testing import EmbeddedBroker, FaultError, Faults


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture(autouse=True)
def no_faults_left(broker: EmbeddedBroker) -> Iterator[None]:
    yield
    broker.faults.clear()


def test_unknown_api_and_error_names_are_refused_naming_the_nearest() -> None:
    faults = Faults()
    with pytest.raises(FaultError, match=r"unknown Kafka API 'Produse' \(did you mean Produce"):
        faults.fail("Produse", "NOT_LEADER_OR_FOLLOWER")
    with pytest.raises(FaultError,
                       match=r"unknown Kafka error 'NOT_LEADER'.*NOT_LEADER_OR_FOLLOWER"):
        faults.fail("Produce", "NOT_LEADER")
    with pytest.raises(FaultError, match="count must be a positive number"):
        faults.fail("Fetch", "REQUEST_TIMED_OUT", count=0)
    with pytest.raises(FaultError, match="NONE is not an error"):
        faults.fail("Fetch", "NONE")
    assert faults.pending == []
    assert faults.fail("list_offsets", 7).describe() == "ListOffsets: fail with REQUEST_TIMED_OUT"


def test_a_delayed_produce_is_answered_after_the_delay(broker: EmbeddedBroker) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    producer.produce("slow", b"warm-up")
    producer.flush(10)
    broker.faults.delay("Produce", 400, count=1)
    started = time.monotonic()
    producer.produce("slow", b"late")
    assert producer.flush(10) == 0
    assert time.monotonic() - started >= 0.4
    assert broker.faults.injected[-1] == "broker 1: Produce: delay 400 ms (v10, #1)"


def test_a_disconnect_makes_the_client_retry_on_a_new_connection(broker: EmbeddedBroker) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, retries=5,
                             enable_idempotence=False)
    producer.send("dropped", b"warm-up").get(10)
    broker.faults.disconnect("Produce", count=1)
    metadata = producer.send("dropped", b"again").get(20)
    producer.close()
    assert metadata.offset == 1
    assert any("Produce: disconnect" in line for line in broker.faults.injected)


def test_a_fault_on_one_topic_leaves_the_others_alone(broker: EmbeddedBroker) -> None:
    broker.faults.fail("Produce", "INVALID_RECORD", count=None, topic="bad")
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    reports: dict[str, Any] = {}
    for topic in ("good", "bad"):
        producer.produce(topic, b"x", on_delivery=lambda err, msg: reports.update(
            {msg.topic(): err}))
        producer.flush(10)
    assert reports["good"] is None
    assert reports["bad"].code() == KafkaError.INVALID_RECORD
