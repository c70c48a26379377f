"""Produce record errors (KIP-467): a batch with invalid records is refused with
INVALID_RECORD or INVALID_TIMESTAMP naming each bad record, so a client fails exactly
those records (the others of the batch with librdkafka's INVALID_DIFFERENT_RECORD) and
the topic holds nothing of the batch."""

from __future__ import annotations

import datetime
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message, Producer

from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import NewRecord, encode_batch
from tests.clients.test_confluent_kafka import consume_all, create_topic
from tests.conftest import BrokerProcess
from tests.wire import WireClient

HOUR_MS = 3_600_000


def _produce(bootstrap: str, topic: str, records: list[dict[str, Any]]) -> list[Any]:
    """Send `records` as one batch; the delivery error of each, in order."""
    # a long linger keeps the records in one batch however slow the machine; flush()
    # sends at once
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 10000,
                         "message.timeout.ms": 15000, "retries": 0})
    results: list[Any] = [...] * len(records)

    def report(index: int) -> Any:
        def cb(err: KafkaError | None, _msg: Message) -> None:
            results[index] = err
        return cb

    for i, r in enumerate(records):
        producer.produce(topic, on_delivery=report(i), **r)
    assert producer.flush(20) == 0
    return results


def test_keyless_records_of_a_compacted_topic_fail_alone(broker: BrokerProcess,
                                                         topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, **{"cleanup.policy": "compact"})
    errors = _produce(broker.bootstrap, topic_name, [
        {"key": b"a", "value": b"1"}, {"value": b"no key"}, {"key": b"b", "value": b"2"},
        {"value": b"no key either"}])
    assert [e.code() for e in errors] == [
        KafkaError._INVALID_DIFFERENT_RECORD, KafkaError.INVALID_RECORD,
        KafkaError._INVALID_DIFFERENT_RECORD, KafkaError.INVALID_RECORD]
    # nothing of the refused batch was written; a keyed retry lands
    assert _produce(broker.bootstrap, topic_name, [{"key": b"a", "value": b"1"}]) == [None]
    assert [m.value() for m in consume_all(broker.bootstrap, topic_name, 1)] == [b"1"]


def test_records_from_the_future_fail_with_invalid_timestamp(broker: BrokerProcess,
                                                             topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    now = int(time.time() * 1000)
    later = now + 2 * HOUR_MS
    # librdkafka gives one record error's partition code to the whole batch
    errors = _produce(broker.bootstrap, topic_name, [
        {"value": b"now", "timestamp": now}, {"value": b"later", "timestamp": later}])
    assert [e.code() for e in errors] == [KafkaError.INVALID_TIMESTAMP] * 2
    # and with several, INVALID_RECORD to each bad record, the rest told apart
    errors = _produce(broker.bootstrap, topic_name, [
        {"value": b"later", "timestamp": later}, {"value": b"now", "timestamp": now},
        {"value": b"later", "timestamp": later}])
    assert [e.code() for e in errors] == [
        KafkaError.INVALID_RECORD, KafkaError._INVALID_DIFFERENT_RECORD,
        KafkaError.INVALID_RECORD]


def _batch(*records: NewRecord) -> bytes:
    return bytes(encode_batch(list(records)))


def _wire_produce(w: WireClient, version: int, topic: str, records: bytes) -> Any:
    m = w.schema(0, version)
    response = w.call(0, version, transactional_id=None, acks=1,
                      timeout=datetime.timedelta(seconds=10), topic_data=(
                          m.TopicProduceData(name=topic, partition_data=(
                              m.PartitionProduceData(index=0, records=records),)),))
    return response.responses[0].partition_responses[0]


@pytest.mark.parametrize("version", [8, 9, 12])
def test_the_wire_response_names_every_bad_record(broker: BrokerProcess, topic_name: str,
                                                  version: int) -> None:
    create_topic(broker.bootstrap, topic_name, **{"cleanup.policy": "compact",
                                                  "message.timestamp.before.max.ms": "60000"})
    now = int(time.time() * 1000)
    records = _batch(NewRecord(key=b"k", value=b"ok", timestamp=now),
                     NewRecord(key=None, value=b"keyless", timestamp=now),
                     NewRecord(key=b"k", value=b"old", timestamp=now - 120_000))
    with WireClient(broker.bootstrap) as w:
        p = _wire_produce(w, version, topic_name, records)
    assert p.error_code == ErrorCode.invalid_timestamp
    assert p.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [e.batch_index for e in p.record_errors] == [1, 2]
    assert p.record_errors[0].batch_index_error_message == (
        f"Compacted topic cannot accept message without key in topic partition {topic_name}-0")
    assert p.record_errors[1].batch_index_error_message.startswith(
        f"Timestamp {now - 120_000} of message with offset 2 is out of range. The timestamp "
        "should be within [")
    assert p.base_offset == -1


def test_invalid_record_message_and_older_versions(broker: BrokerProcess,
                                                   topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, **{"cleanup.policy": "compact"})
    records = _batch(NewRecord(key=None, value=b"a"), NewRecord(key=b"k", value=b"b"))
    with WireClient(broker.bootstrap) as w:
        p = _wire_produce(w, 9, topic_name, records)
        assert p.error_code == ErrorCode.invalid_record
        assert p.error_message == (
            "One or more records have been rejected due to 1 record errors in total, and "
            "only showing the first three errors at most: [RecordError(batchIndex=0, "
            "message='Compacted topic cannot accept message without key in topic "
            f"partition {topic_name}-0')]")
        # v7 has no record errors: the code alone
        old = _wire_produce(w, 7, topic_name, records)
        assert old.error_code == ErrorCode.invalid_record
        assert not hasattr(old, "record_errors")


def test_a_batch_over_the_topic_limit_is_message_too_large_without_record_errors(
        broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, **{"max.message.bytes": "1000"})
    records = _batch(NewRecord(value=b"small"), NewRecord(value=b"x" * 2000))
    with WireClient(broker.bootstrap) as w:
        p = _wire_produce(w, 9, topic_name, records)
    assert p.error_code == ErrorCode.message_too_large
    assert p.record_errors == ()
    assert p.error_message.startswith(
        f"The record batch size in the append to {topic_name}-0 is ")
    assert p.error_message.endswith(" bytes which exceeds the maximum configured value of 1000.")
