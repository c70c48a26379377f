"""Injected faults: names checked, errors encoded as a real broker encodes them, and what
clients see (delays, disconnects, faults on one topic)."""

from __future__ import annotations

import datetime
import time
import typing
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaProducer
from kio.schema.errors import ErrorCode

from odradek.protocol.messages import decode_response, encode_response, request_class
from odradek.server.handlers import HANDLERS
from odradek.testing import EmbeddedBroker, FaultError, Faults
from odradek.testing.error_response import error_response


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture(autouse=True)
def no_faults_left(broker: EmbeddedBroker) -> Iterator[None]:
    yield
    broker.faults.clear()


def element(cls: type, field: str) -> Any:
    return typing.get_args(typing.get_type_hints(cls)[field])[0]


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


def test_every_api_and_version_the_broker_serves_has_an_encodable_error_response() -> None:
    for api_key, handler in HANDLERS.items():
        for version in range(handler.min_version, handler.max_version + 1):
            response = error_response(api_key, version, None, ErrorCode.request_timed_out)
            frame = encode_response(api_key, version, 1, response)
            assert len(frame) > 8


def test_a_fetch_by_topic_id_fails_every_partition_it_named() -> None:
    fetch = request_class(1, 16)
    topic_cls = element(fetch, "topics")
    part_cls = element(topic_cls, "partitions")
    topic_id = uuid.uuid4()
    parts = tuple(part_cls(partition=p, current_leader_epoch=0, fetch_offset=0,
                           last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1)
                  for p in (0, 2))
    request = fetch(replica_state=None, max_wait=datetime.timedelta(0), min_bytes=1,
                    max_bytes=1, isolation_level=0, session_id=0, session_epoch=-1,
                    topics=(topic_cls(topic_id=topic_id, partitions=parts),),
                    forgotten_topics_data=(), rack_id="")
    response = error_response(1, 16, request, ErrorCode.not_leader_or_follower)
    frame = encode_response(1, 16, 9, response)
    decoded = decode_response(1, 16, frame[9:])  # size, correlation id, tagged fields
    assert decoded.error_code == ErrorCode.not_leader_or_follower
    [topic] = decoded.responses
    assert topic.topic_id == topic_id
    assert [(p.partition_index, p.error_code, p.high_watermark) for p in topic.partitions] == [
        (0, ErrorCode.not_leader_or_follower, -1), (2, ErrorCode.not_leader_or_follower, -1)]


def test_requests_naming_plain_lists_get_one_entry_per_name() -> None:
    find = request_class(10, 4)
    response = error_response(10, 4, find(key_type=0, coordinator_keys=("g1", "g2")),
                              ErrorCode.coordinator_not_available)
    assert [(c.key, c.node_id, c.error_code) for c in response.coordinators] == [
        ("g1", -1, ErrorCode.coordinator_not_available),
        ("g2", -1, ErrorCode.coordinator_not_available)]
    delete = request_class(42, 2)
    response = error_response(42, 2, delete(groups_names=("a",)), ErrorCode.group_id_not_found)
    assert [(r.group_id, r.error_code) for r in response.results] == [
        ("a", ErrorCode.group_id_not_found)]


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
