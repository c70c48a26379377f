"""Replication on a real cluster (tests/cluster/harness.py: ZooKeeper and three broker
processes) with confluent-kafka clients: what acks=all promises across a SIGKILL, what
min.insync.replicas refuses, and what an unclean election loses."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import NewTopic

from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import NewRecord, encode_batch
from tests.cluster.harness import Cluster, client_config, quiet_stderr
from tests.wire import WireClient

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("replication"), size=3) as c, quiet_stderr():
        yield c


def create(c: Cluster, replicas: list[int], configs: dict[str, str] | None = None) -> str:
    name = f"r-{uuid.uuid4().hex[:8]}"
    admin = c.admin()  # held until the answer: a dropped client cancels it
    admin.create_topics([NewTopic(name, 1, replica_assignment=[replicas],
                                  config=configs or {})])[name].result(15)
    c.wait_for(lambda: c.partitions(name)[0][0] == replicas[0], 15, f"leader of {name}")
    return name


def consume_all(c: Cluster, topic: str, expected: int, timeout: float = 30.0) -> list[bytes]:
    consumer = Consumer(client_config(c.bootstrap, **{
        "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "enable.partition.eof": True}))
    consumer.assign([_tp(topic)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF and len(got) >= expected:
                    break
                continue
            got.append(msg.value() or b"")
    finally:
        consumer.close()
    return got


def _tp(topic: str) -> Any:
    from confluent_kafka import TopicPartition

    return TopicPartition(topic, 0, 0)


def raw_produce(bootstrap: str, topic: str, value: bytes, acks: int) -> int:
    with WireClient(bootstrap) as w:
        m = w.schema(0, 9)
        import datetime

        r = w.call(0, 9, transactional_id=None, acks=acks,
                   timeout=datetime.timedelta(seconds=5), topic_data=(
                       m.TopicProduceData(name=topic, partition_data=(
                           m.PartitionProduceData(index=0, records=encode_batch(
                               [NewRecord(value=value)])),)),))
    return int(r.responses[0].partition_responses[0].error_code)


def test_every_acks_all_record_survives_a_sigkill_of_the_leader(cluster: Cluster) -> None:
    topic = create(cluster, [1, 2, 3])
    producer = Producer(client_config(cluster.bootstrap, **{
        "acks": "all", "enable.idempotence": True, "linger.ms": 2,
        "message.timeout.ms": 60_000}))
    acked: list[bytes] = []
    ack_times: list[float] = []

    def report(err: Any, msg: Any) -> None:
        if err is None:
            acked.append(msg.value())
            ack_times.append(time.monotonic())

    killed_at = 0.0
    for i in range(3000):
        producer.produce(topic, f"m{i:05d}".encode(), on_delivery=report)
        producer.poll(0)
        if i == 1000:
            producer.flush(30)
            killed_at = time.monotonic()
            cluster.kill(1)
        if i % 100 == 0:
            time.sleep(0.01)
    assert producer.flush(90) == 0
    after = [t for t in ack_times if t > killed_at]
    failover = after[0] - killed_at if after else float("inf")
    print(f"first acks=all ack after the leader's SIGKILL: {failover:.2f}s")
    got = consume_all(cluster, topic, len(acked))
    assert len(got) == len(set(got)), "duplicates despite idempotence"
    missing = set(acked) - set(got)
    assert not missing, f"{len(missing)} acknowledged records lost"
    assert len(acked) == 3000
    cluster.start(1)
    cluster.wait_for(lambda: set(cluster.partitions(topic)[0][2]) == {1, 2, 3}, 60,
                     "the old leader back in the ISR")


def test_min_insync_replicas_two_refuses_acks_all_with_two_brokers_down(
        cluster: Cluster) -> None:
    topic = create(cluster, [1, 2, 3], {"min.insync.replicas": "2"})
    assert raw_produce(cluster.broker(1).bootstrap, topic, b"ok", -1) == ErrorCode.none
    cluster.kill(2)
    cluster.kill(3)
    try:
        cluster.wait_for(lambda: cluster.partitions(topic, 1)[0][2] == (1,), 30,
                         "the ISR to shrink to the leader")
        assert raw_produce(cluster.broker(1).bootstrap, topic, b"no", -1) == \
            ErrorCode.not_enough_replicas
        assert raw_produce(cluster.broker(1).bootstrap, topic, b"yes", 1) == ErrorCode.none
    finally:
        cluster.start(2)
        cluster.start(3)
    cluster.wait_for(lambda: set(cluster.partitions(topic)[0][2]) == {1, 2, 3}, 60,
                     "the followers back in the ISR")
    assert raw_produce(cluster.broker(1).bootstrap, topic, b"again", -1) == ErrorCode.none


def test_unclean_election_loses_exactly_the_unreplicated_tail(cluster: Cluster) -> None:
    """Seed 003's rack power story: the last in-sync replica dies with writes nobody
    else has; an out-of-sync replica leads (unclean) and those writes are gone — and
    when the old leader returns it truncates them and matches the new leader."""
    topic = create(cluster, [1, 2, 3], {"unclean.leader.election.enable": "true"})
    for i in range(5):
        assert raw_produce(cluster.broker(1).bootstrap, topic, f"c{i}".encode(), -1) == 0
    cluster.kill(2)
    cluster.kill(3)
    cluster.wait_for(lambda: cluster.partitions(topic, 1)[0][2] == (1,), 30, "ISR = (1,)")
    for i in range(3):  # only broker 1 has these
        assert raw_produce(cluster.broker(1).bootstrap, topic, f"lost{i}".encode(), 1) == 0
    cluster.kill(1)
    cluster.start(2)
    cluster.start(3)
    cluster.wait_for(lambda: cluster.partitions(topic, 2)[0][0] in (2, 3), 60,
                     "an unclean leader")
    leader = cluster.partitions(topic, 2)[0][0]
    assert raw_produce(cluster.broker(leader).bootstrap, topic, b"new", 1) == 0
    cluster.start(1)
    cluster.wait_for(lambda: set(cluster.partitions(topic)[0][2]) == {1, 2, 3}, 60,
                     "all back in the ISR")
    got = consume_all(cluster, topic, 6)
    assert got == [b"c0", b"c1", b"c2", b"c3", b"c4", b"new"]
    files = {}
    for node in (1, 2, 3):
        d = cluster.broker(node).data_dir / f"{topic}-0"
        files[node] = b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))
    assert files[1] == files[leader] and files[2] == files[3]


def test_committed_offsets_survive_a_sigkill_of_the_group_coordinator(cluster: Cluster) -> None:
    """Commits are written to __consumer_offsets with acks=all, and the coordinator that
    takes over loads its replica to the log end: the commit is there, and so is the
    first consumer's leave, so the second one is not kept waiting for a ghost member
    (it was 45 s — a session timeout — when the load stopped at a stale watermark)."""
    topic = create(cluster, [1, 2, 3])
    producer = Producer(client_config(cluster.bootstrap, acks="all"))
    for i in range(20):
        producer.produce(topic, f"m{i:02d}".encode())
    assert producer.flush(30) == 0
    group = f"g-{uuid.uuid4().hex[:6]}"

    def consumer() -> Any:
        c = Consumer(client_config(cluster.bootstrap, **{
            "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False}))
        c.subscribe([topic])
        return c

    first = consumer()
    read: list[Any] = []
    deadline = time.monotonic() + 30
    while len(read) < 10 and time.monotonic() < deadline:
        msg = first.poll(0.5)
        if msg is not None and msg.error() is None:
            read.append(msg)
    assert len(read) == 10
    first.commit(message=read[-1], asynchronous=False)
    first.close()
    admin = cluster.admin()  # held until the answer: a dropped client cancels it
    described = admin.describe_consumer_groups([group])[group].result(15)
    coordinator = described.coordinator.id
    cluster.kill(coordinator)
    killed_at = time.monotonic()
    try:
        second = consumer()
        msg = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = second.poll(0.5)
            if msg is not None and msg.error() is None:
                break
        resumed = time.monotonic() - killed_at
        print(f"\nresumed {resumed:.1f}s after the coordinator's SIGKILL")
        second.close()
        assert msg is not None and msg.error() is None, "nothing read after the failover"
        assert (msg.offset(), msg.value()) == (10, b"m10")
        assert resumed < 30, "the new coordinator waited for the member that had left"
    finally:
        cluster.start(coordinator)


def test_a_transaction_over_partitions_led_by_three_brokers(cluster: Cluster) -> None:
    """The transaction coordinator writes the markers of partitions other brokers lead
    with WriteTxnMarkers: commits become readable everywhere, aborts nowhere."""
    cluster.wait_formed()
    topic = f"tx-{uuid.uuid4().hex[:8]}"
    admin = cluster.admin()  # held until the answer: a dropped client cancels it
    admin.create_topics([NewTopic(topic, 3, replica_assignment=[
        [1, 2, 3], [2, 3, 1], [3, 1, 2]])])[topic].result(15)
    cluster.wait_for(lambda: [v[0] for _, v in sorted(cluster.partitions(topic).items())]
                     == [1, 2, 3], 15, "a leader per broker")
    producer = Producer(client_config(cluster.bootstrap, **{
        "transactional.id": f"t-{topic}", "transaction.timeout.ms": 30_000}))
    producer.init_transactions(30)
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for p in range(3):
            producer.produce(topic, f"{outcome}-{p}".encode(), partition=p)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    from confluent_kafka import TopicPartition

    consumer = Consumer(client_config(cluster.bootstrap, **{
        "group.id": f"g-{topic}", "isolation.level": "read_committed",
        "enable.partition.eof": True, "enable.auto.commit": False}))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    got: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 30
    while len(at_end) < 3 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error() is not None:
            if msg.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(msg.partition())
            continue
        got.append(msg.value() or b"")
    consumer.close()
    assert sorted(got) == sorted([f"commit-{p}".encode() for p in range(3)] * 2)
