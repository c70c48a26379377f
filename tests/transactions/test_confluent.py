"""Transactions with confluent-kafka (librdkafka 2.16): what its users rely on."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from tests.conftest import BrokerProcess
from tests.transactions.helpers import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    consumer,
    create_topic,
    end_offsets,
    produce_in_txn,
    read_all,
    txn_producer,
    unique,
    values,
    wait_for,
)


def test_aborted_records_are_hidden_from_read_committed_and_seen_by_read_uncommitted(
        txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    topic = create_topic(bootstrap, unique("abort"))
    p = txn_producer(bootstrap, unique("tx"))
    produce_in_txn(p, topic, ["c1", "c2"])
    produce_in_txn(p, topic, ["a1", "a2", "a3"], commit=False)
    produce_in_txn(p, topic, ["c3"])
    produce_in_txn(p, topic, ["a4"], commit=False)
    committed = read_all(bootstrap, topic, isolation=READ_COMMITTED)
    assert values(committed) == ["c1", "c2", "c3"]
    everything = read_all(bootstrap, topic, isolation=READ_UNCOMMITTED)
    assert values(everything) == ["c1", "c2", "a1", "a2", "a3", "c3", "a4"]
    # offsets: data, a marker after each transaction; control batches are never delivered
    assert [o for o, _ in everything] == [0, 1, 3, 4, 5, 7, 9]
    assert end_offsets(bootstrap, topic) == (11, 11)
    p.flush(5)


def test_second_producer_with_the_same_transactional_id_fences_the_first(
        txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    topic = create_topic(bootstrap, unique("fence"))
    tid = unique("tx")
    first = txn_producer(bootstrap, tid)
    first.begin_transaction()
    first.produce(topic, b"zombie-1", partition=0)
    assert first.flush(10) == 0
    lso, high = end_offsets(bootstrap, topic)
    assert (lso, high) == (0, 1)  # the open transaction holds read_committed back

    started = time.monotonic()
    second = txn_producer(bootstrap, tid)  # fences the first, aborts its transaction
    print(f"\nsecond producer initialized (first fenced) in {time.monotonic() - started:.3f}s")
    failures: list[KafkaError] = []

    def fenced() -> bool:
        try:
            first.poll(0.01)
        except KafkaException as e:  # librdkafka raises its fatal error from poll
            failures.append(e.args[0])
        return bool(failures)

    started = time.monotonic()
    first.produce(topic, b"zombie-2", partition=0,
                  on_delivery=lambda err, _msg: failures.append(err))
    wait_for(fenced, 10, "the fenced producer's write failing")
    print(f"the fenced producer's next write rejected in {time.monotonic() - started:.3f}s: "
          f"{failures[0]}")
    assert failures[0].code() == KafkaError._FENCED and failures[0].fatal()
    with pytest.raises(KafkaException):
        first.commit_transaction(10)

    produce_in_txn(second, topic, ["second"])
    assert values(read_all(bootstrap, topic)) == ["second"]
    assert values(read_all(bootstrap, topic, isolation=READ_UNCOMMITTED)) == ["zombie-1",
                                                                             "second"]


def test_a_transaction_left_open_past_its_timeout_is_aborted_by_the_broker(
        txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    topic = create_topic(bootstrap, unique("timeout"))
    p = txn_producer(bootstrap, unique("tx"), **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    p.produce(topic, b"forgotten", partition=0)
    assert p.flush(10) == 0
    opened = time.monotonic()
    assert end_offsets(bootstrap, topic) == (0, 1)
    took = wait_for(lambda: end_offsets(bootstrap, topic)[0] == 2, 10,
                    "the broker aborting the timed-out transaction")
    print(f"\nLSO released {time.monotonic() - opened:.2f}s after the write "
          f"(timeout 2 s, abort scan every 0.5 s); waited {took:.2f}s")
    assert values(read_all(bootstrap, topic)) == []
    assert values(read_all(bootstrap, topic, isolation=READ_UNCOMMITTED)) == ["forgotten"]
    with pytest.raises(KafkaException):
        p.commit_transaction(10)


def test_the_lso_holds_read_committed_consumers_back_while_a_transaction_is_open(
        txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    topic = create_topic(bootstrap, unique("lso"))
    produce_in_txn(txn_producer(bootstrap, unique("tx")), topic, ["before"])
    open_txn = txn_producer(bootstrap, unique("tx"))
    open_txn.begin_transaction()
    open_txn.produce(topic, b"inside", partition=0)
    assert open_txn.flush(10) == 0
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, b"after", partition=0)
    assert plain.flush(10) == 0
    assert end_offsets(bootstrap, topic) == (2, 4)  # LSO at the open transaction's start
    assert values(read_all(bootstrap, topic)) == ["before"]
    assert values(read_all(bootstrap, topic, isolation=READ_UNCOMMITTED)) == [
        "before", "inside", "after"]

    # A read_committed consumer waiting at the LSO is woken by the commit marker, not by
    # its fetch.wait.max.ms (5 s here).
    waiting = consumer(bootstrap, READ_COMMITTED, **{"fetch.wait.max.ms": 5000,
                                                     "enable.partition.eof": False})
    waiting.assign([TopicPartition(topic, 0, 2)])
    got: list[tuple[str, float]] = []

    def poll() -> None:
        deadline = time.monotonic() + 15
        while len(got) < 2 and time.monotonic() < deadline:
            m = waiting.poll(0.1)
            if m is not None and m.error() is None:
                got.append((m.value().decode(), time.monotonic()))

    reader = threading.Thread(target=poll)
    reader.start()
    time.sleep(1.5)  # the consumer is now parked in a fetch at the LSO
    assert got == []
    committed_at = time.monotonic()
    open_txn.commit_transaction(10)
    reader.join(20)
    waiting.close()
    assert [v for v, _ in got] == ["inside", "after"]
    print(f"\nread_committed consumer saw the commit {got[0][1] - committed_at:.3f}s after it")
    assert got[0][1] - committed_at < 2.0
    assert end_offsets(bootstrap, topic) == (5, 5)


def test_send_offsets_to_transaction_commits_the_offsets_with_the_records(
        txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    source = create_topic(bootstrap, unique("src"))
    sink = create_topic(bootstrap, unique("sink"))
    group = unique("g")
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        plain.produce(source, f"m{i}".encode(), partition=0)
    assert plain.flush(10) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "isolation.level": READ_COMMITTED, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(source, 0)])
    p = txn_producer(bootstrap, unique("tx"))

    def committed() -> int:
        return int(c.committed([TopicPartition(source, 0)], timeout=10)[0].offset)

    def step(count: int, commit: bool) -> None:
        msgs = c.consume(count, 10)
        assert len(msgs) == count
        p.begin_transaction()
        for m in msgs:
            p.produce(sink, m.value(), partition=0)
        p.send_offsets_to_transaction([TopicPartition(source, 0, msgs[-1].offset() + 1)],
                                      c.consumer_group_metadata(), 10)
        if commit:
            p.commit_transaction(10)
        else:
            assert p.flush(10) == 0
            p.abort_transaction(10)

    step(4, commit=True)
    assert committed() == 4
    step(3, commit=False)
    assert committed() == 4  # the aborted transaction's offsets never count
    c.seek(TopicPartition(source, 0, 4))
    step(6, commit=True)
    assert committed() == 10
    c.close()
    assert values(read_all(bootstrap, sink)) == [f"m{i}" for i in range(10)]


def test_transactions_across_several_partitions_and_topics_commit_together(
        txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    a = create_topic(bootstrap, unique("multi-a"), partitions=3)
    b = create_topic(bootstrap, unique("multi-b"), partitions=2)
    p = txn_producer(bootstrap, unique("tx"))
    p.begin_transaction()
    for i in range(30):
        p.produce(a, f"a{i}".encode(), partition=i % 3)
        p.produce(b, f"b{i}".encode(), partition=i % 2)
    assert p.flush(10) == 0
    assert all(end_offsets(bootstrap, a, i)[0] == 0 for i in range(3))
    p.commit_transaction(10)
    assert sum(len(read_all(bootstrap, a, i)) for i in range(3)) == 30
    assert sum(len(read_all(bootstrap, b, i)) for i in range(2)) == 30


def test_small_transactions_per_second(txn_broker: BrokerProcess) -> None:
    """A number for the report: one record per transaction, one partition."""
    bootstrap = txn_broker.bootstrap
    topic = create_topic(bootstrap, unique("rate"))
    p = txn_producer(bootstrap, unique("tx"))
    count = 300
    started = time.monotonic()
    for i in range(count):
        p.begin_transaction()
        p.produce(topic, f"{i}".encode(), partition=0)
        p.commit_transaction(10)
    rate = count / (time.monotonic() - started)
    print(f"\n{rate:.0f} transactions/s (one record each, confluent-kafka, one partition)")
    assert len(read_all(bootstrap, topic)) == count
