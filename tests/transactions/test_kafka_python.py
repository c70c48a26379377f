"""Transactions with kafka-python 3 (its own protocol code: AddPartitionsToTxn v0-v3,
TxnOffsetCommit with KIP-447 group metadata, a read_committed KafkaConsumer)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError as KafkaPythonError
from kafka.structs import OffsetAndMetadata

from tests.conftest import BrokerProcess
from tests.transactions.helpers import READ_UNCOMMITTED, create_topic, read_all, unique, values


def _producer(bootstrap: str, transactional_id: str) -> KafkaProducer:
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                      linger_ms=1)
    p.init_transactions()
    return p


def _read(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      consumer_timeout_ms=3000, group_id=None)
    c.assign([TopicPartition(topic, 0)])
    got = [m.value for m in c]
    c.close()
    return got


def test_commit_abort_and_read_committed(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    topic = create_topic(bootstrap, unique("kp"))
    p = _producer(bootstrap, unique("kp-tx"))
    for vals, commit in ((["c1", "c2"], True), (["a1", "a2"], False), (["c3"], True)):
        p.begin_transaction()
        for v in vals:
            p.send(topic, v.encode(), partition=0)
        p.flush(10)
        if commit:
            p.commit_transaction()
        else:
            p.abort_transaction()
    p.close()
    assert _read(bootstrap, topic, "read_committed") == [b"c1", b"c2", b"c3"]
    assert _read(bootstrap, topic, "read_uncommitted") == [b"c1", b"c2", b"a1", b"a2", b"c3"]
    # librdkafka reads what kafka-python wrote the same way
    assert values(read_all(bootstrap, topic)) == ["c1", "c2", "c3"]


def test_send_offsets_to_transaction_and_fencing(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    source = create_topic(bootstrap, unique("kp-src"))
    sink = create_topic(bootstrap, unique("kp-sink"))
    group, tid = unique("kp-g"), unique("kp-tx")
    plain = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(6):
        plain.send(source, f"m{i}".encode(), partition=0)
    plain.flush(10)
    plain.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             isolation_level="read_committed", enable_auto_commit=False,
                             auto_offset_reset="earliest")
    tp = TopicPartition(source, 0)
    consumer.assign([tp])
    p = _producer(bootstrap, tid)
    p.begin_transaction()
    records: list[Any] = []
    deadline = time.monotonic() + 20
    while len(records) < 6 and time.monotonic() < deadline:
        records += consumer.poll(timeout_ms=500, max_records=6 - len(records)).get(tp, [])
    assert len(records) == 6
    for r in records:
        p.send(sink, r.value, partition=0)
    p.send_offsets_to_transaction({tp: OffsetAndMetadata(records[-1].offset + 1, "", -1)},
                                  consumer.group_metadata())
    p.commit_transaction()
    assert consumer.committed(tp) == 6

    # a second producer with the same transactional id fences the first
    p.begin_transaction()
    p.send(sink, b"zombie", partition=0)
    p.flush(10)
    newer = _producer(bootstrap, tid)
    with pytest.raises(KafkaPythonError):
        p.send(sink, b"zombie-2", partition=0).get(10)
        p.commit_transaction()
    # kafka-python answers the zombie's INVALID_PRODUCER_EPOCH with a KIP-360 epoch bump
    # of its own; arriving while the newer producer's transaction is open, it would
    # fence that transaction (Kafka's coordinator fences an ongoing transaction before
    # it checks the epoch). The zombie is stopped first, as an application would.
    p.close(timeout=10)
    newer.begin_transaction()
    newer.send(sink, b"newer", partition=0)
    newer.commit_transaction()
    newer.close()
    consumer.close()
    assert values(read_all(bootstrap, sink)) == [f"m{i}" for i in range(6)] + ["newer"]
    assert "zombie" in values(read_all(bootstrap, sink, isolation=READ_UNCOMMITTED))
