"""Transaction version 2 (KIP-890 part 2) on the wire, as a Kafka 4 Java producer
speaks it: no AddPartitionsToTxn and no AddOffsetsToTxn (Produce v12 and
TxnOffsetCommit v5 add their partitions), and EndTxn v5 bumps the epoch at the end of
every transaction. What a read_committed confluent-kafka consumer then sees is the
user-visible part.
"""

from __future__ import annotations

import datetime
import logging
import re
import time
from typing import Any

import confluent_kafka
from confluent_kafka import Producer, TopicPartition

from odradek.protocol.errors import ErrorCode
from tests.conftest import BrokerProcess
from tests.transactions.helpers import (
    READ_UNCOMMITTED,
    consumer,
    create_topic,
    produce_in_txn,
    read_all,
    unique,
    values,
)
from tests.transactions.test_protocol import (
    API_VERSIONS,
    END_TXN,
    FIND_COORDINATOR,
    PRODUCE,
    TXN_OFFSET_COMMIT,
    describe_producers,
    find_txn_coordinator,
    init,
    txn_batch,
    wire,  # noqa: F401 - the fixture
)
from tests.wire import WireClient


def produce_v12(c: WireClient, topic: str, records: bytes, tid: str,
                partition: int = 0) -> ErrorCode:
    s = c.schema(PRODUCE, 12)
    r = c.call(PRODUCE, 12, transactional_id=tid, acks=-1,
               timeout=datetime.timedelta(seconds=5),
               topic_data=(s.TopicProduceData(name=topic, partition_data=(
                   s.PartitionProduceData(index=partition, records=records),)),))
    return ErrorCode(r.responses[0].partition_responses[0].error_code)


def end_txn_v5(c: WireClient, tid: str, pid: int, epoch: int,
               commit: bool) -> tuple[ErrorCode, int, int]:
    r = c.call(END_TXN, 5, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
               committed=commit)
    return ErrorCode(r.error_code), r.producer_id, r.producer_epoch


def txn_offset_commit_v5(c: WireClient, tid: str, group: str, pid: int, epoch: int,
                         topic: str, offset: int) -> ErrorCode:
    """As a client sends it: to the group's coordinator, retried while it loads."""
    c.call(FIND_COORDINATOR, 3, key=group, key_type=0)  # creates __consumer_offsets
    deadline = time.monotonic() + 10
    while True:
        code = _txn_offset_commit_v5(c, tid, group, pid, epoch, topic, offset)
        if code not in (ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator) \
                or time.monotonic() > deadline:
            return code
        time.sleep(0.05)


def _txn_offset_commit_v5(c: WireClient, tid: str, group: str, pid: int, epoch: int,
                          topic: str, offset: int) -> ErrorCode:
    s = c.schema(TXN_OFFSET_COMMIT, 5)
    r = c.call(TXN_OFFSET_COMMIT, 5, transactional_id=tid, group_id=group,
               producer_id=pid, producer_epoch=epoch, generation_id=-1, member_id="",
               group_instance_id=None, topics=(s.TxnOffsetCommitRequestTopic(
                   name=topic, partitions=(s.TxnOffsetCommitRequestPartition(
                       partition_index=0, committed_offset=offset,
                       committed_leader_epoch=-1, committed_metadata=""),)),))
    return ErrorCode(r.topics[0].partitions[0].error_code)


def committed(bootstrap: str, group: str, topic: str) -> int:
    c = consumer(bootstrap, READ_UNCOMMITTED, **{"group.id": group})
    try:
        return int(c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset)
    finally:
        c.close()


def test_transaction_version_2_is_finalized_and_its_versions_advertised(
        wire: WireClient) -> None:  # noqa: F811
    r = wire.call(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    finalized = {f.name: (f.min_version_level, f.max_version_level)
                 for f in r.finalized_features}
    assert finalized["transaction.version"] == (2, 2)
    keys = {k.api_key: k.max_version for k in r.api_keys}
    assert (keys[PRODUCE], keys[END_TXN], keys[24], keys[TXN_OFFSET_COMMIT]) == (12, 5, 5, 5)


def test_every_transaction_ends_with_an_epoch_bump_and_adds_its_partitions_itself(
        txn_broker: BrokerProcess, wire: WireClient) -> None:  # noqa: F811
    topic = create_topic(txn_broker.bootstrap, unique("tv2"))
    tid, group = unique("tx"), unique("g")
    find_txn_coordinator(wire, tid)
    code, pid, e0 = init(wire, tid, version=5)
    assert code == ErrorCode.none

    # 1: committed. Produce v12 to a partition never added, offsets without AddOffsets
    assert produce_v12(wire, topic, txn_batch(pid, e0, 0, "a", "b"), tid) == ErrorCode.none
    assert txn_offset_commit_v5(wire, tid, group, pid, e0, topic, 7) == ErrorCode.none
    assert end_txn_v5(wire, tid, pid, e0, commit=True) == (ErrorCode.none, pid, e0 + 1)
    # a retry of that EndTxn (its answer lost) is answered the same, with no new bump
    assert end_txn_v5(wire, tid, pid, e0, commit=True) == (ErrorCode.none, pid, e0 + 1)
    # the marker carried the new epoch into the partition: the old one is fenced there
    assert [(p.producer_id, p.producer_epoch) for p in describe_producers(wire, topic)] \
        == [(pid, e0 + 1)]
    assert produce_v12(wire, topic, txn_batch(pid, e0, 2, "zombie"), tid) == \
        ErrorCode.invalid_producer_epoch

    # 2: aborted, at the new epoch, whose sequences start again at 0
    e1 = e0 + 1
    assert produce_v12(wire, topic, txn_batch(pid, e1, 0, "c"), tid) == ErrorCode.none
    assert txn_offset_commit_v5(wire, tid, group, pid, e1, topic, 99) == ErrorCode.none
    assert end_txn_v5(wire, tid, pid, e1, commit=False) == (ErrorCode.none, pid, e1 + 1)

    # 3: nothing sent. Commit is refused; an abort still bumps (Kafka's TV2 table)
    e2 = e1 + 1
    assert end_txn_v5(wire, tid, pid, e2, commit=True)[0] == ErrorCode.invalid_txn_state
    assert end_txn_v5(wire, tid, pid, e2, commit=False) == (ErrorCode.none, pid, e2 + 1)
    assert end_txn_v5(wire, tid, pid, e0, commit=False)[0] == ErrorCode.producer_fenced

    # 4: committed again at the latest epoch
    e3 = e2 + 1
    assert produce_v12(wire, topic, txn_batch(pid, e3, 0, "d"), tid) == ErrorCode.none
    assert end_txn_v5(wire, tid, pid, e3, commit=True) == (ErrorCode.none, pid, e3 + 1)

    assert values(read_all(txn_broker.bootstrap, topic)) == ["a", "b", "d"]
    assert values(read_all(txn_broker.bootstrap, topic, isolation=READ_UNCOMMITTED)) == \
        ["a", "b", "c", "d"]
    assert committed(txn_broker.bootstrap, group, topic) == 7  # the aborted 99 is dropped


def test_a_transaction_version_1_producer_is_unchanged(
        txn_broker: BrokerProcess, wire: WireClient) -> None:  # noqa: F811
    """EndTxn v4 keeps the epoch and Produce v11 still needs AddPartitionsToTxn: what
    the transaction version 1 clients (librdkafka, kafka-python) rely on."""
    topic = create_topic(txn_broker.bootstrap, unique("tv1"))
    tid = unique("tx")
    find_txn_coordinator(wire, tid)
    _, pid, epoch = init(wire, tid)
    s = wire.schema(PRODUCE, 11)
    r: Any = wire.call(PRODUCE, 11, transactional_id=tid, acks=-1,
                       timeout=datetime.timedelta(seconds=5),
                       topic_data=(s.TopicProduceData(name=topic, partition_data=(
                           s.PartitionProduceData(index=0,
                                                  records=txn_batch(pid, epoch, 0, "x")),)),))
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.invalid_txn_state
    assert produce_v12(wire, topic, txn_batch(pid, epoch, 0, "y"), tid) == ErrorCode.none
    r = wire.call(END_TXN, 4, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                  committed=True)
    assert r.error_code == ErrorCode.none
    assert init(wire, tid)[2] == epoch + 1  # the end did not bump it
    assert values(read_all(txn_broker.bootstrap, topic)) == ["y"]


class _SentRequests(logging.Handler):
    """The (API, version) of every request librdkafka logs with debug=protocol."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: set[tuple[str, int]] = set()

    def emit(self, record: logging.LogRecord) -> None:
        m = re.search(r"Sent (\w+)Request \(v(\d+)", record.getMessage())
        if m:
            self.sent.add((m.group(1), int(m.group(2))))


def test_confluent_kafka_transactions_work_with_version_2_finalized(
        txn_broker: BrokerProcess) -> None:
    """librdkafka 2.16 does not read `transaction.version`: it keeps version 1's
    protocol (AddPartitionsToTxn v0, Produce v10, EndTxn v1), which the broker still
    serves as Kafka 4 does. Should a later librdkafka move to version 2, the versions
    asserted here change and this test says so."""
    topic = create_topic(txn_broker.bootstrap, unique("rdk"))
    handler = _SentRequests()
    logger = logging.getLogger(f"rdkafka-{unique('p')}")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    p = Producer({"bootstrap.servers": txn_broker.bootstrap, "linger.ms": 1,
                  "transactional.id": unique("tx"), "debug": "protocol", "logger": logger})
    try:
        p.init_transactions(30)
        produce_in_txn(p, topic, ["kept"])
        produce_in_txn(p, topic, ["dropped"], commit=False)
        produce_in_txn(p, topic, ["kept too"])
        p.poll(0)
    finally:
        p.flush(10)
    assert values(read_all(txn_broker.bootstrap, topic)) == ["kept", "kept too"]
    txn_apis = {(api, v) for api, v in handler.sent
                if api in ("Produce", "EndTxn", "AddPartitionsToTxn")}
    if confluent_kafka.libversion()[0].startswith("2.16."):
        assert txn_apis == {("AddPartitionsToTxn", 0), ("Produce", 10), ("EndTxn", 1)}
