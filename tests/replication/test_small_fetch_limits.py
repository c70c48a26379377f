"""Replica fetch limits smaller than a record batch on a real ZooKeeper cluster: a
fetch always carries the first batch of the first partition with data (KIP-74), and
the partitions sharing a follower's fetch session take turns (KIP-227), so every one
of them keeps moving.

Followers whose `replica.fetch.max.bytes` and `replica.fetch.response.max.bytes` are
below the producer's batches keep three partitions (one leader, one fetcher) fully
replicated under acks=all, and catch up a backlog after a stop. In the slow set (a
cluster of its own, ~30 s); the default run has the in-process version
(test_fetch_sessions.py) and the consumer's (clients/test_confluent_kafka.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.cluster.harness import Cluster, client_config, quiet_stderr

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

LIMIT = 1024  # bytes: every fetch limit below, well under one batch
RECORD = 512  # bytes of incompressible value
BATCH = 4096  # the producer's batch.size: 8 records
# per partition: 50 batches, many more than the producer keeps in flight (5), so a
# partition the leader leaves behind is not rescued by a new append
RECORDS = 400
PARTITIONS = 3
CONFIGS = {
    "replica.fetch.max.bytes": str(LIMIT),
    "replica.fetch.response.max.bytes": str(LIMIT),
    # a follower that stops moving leaves the ISR (and acks=all fails) within the test
    "replica.lag.time.max.ms": "4000",
    "replica.fetch.backoff.ms": "200",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("small-fetch"), size=2, configs=CONFIGS) as c, \
            quiet_stderr():
        yield c


def create(cluster: Cluster) -> str:
    """A topic of PARTITIONS partitions, all led by broker 1 and followed by broker 2."""
    topic = f"big-{uuid.uuid4().hex[:6]}"
    admin = cluster.admin()  # held until the answer: a dropped client cancels it
    admin.create_topics([NewTopic(topic, PARTITIONS, replica_assignment=[[1, 2]] * PARTITIONS,
                                  config={"min.insync.replicas": "2"})])[topic].result(15)
    cluster.wait_for(lambda: all(p[0] == 1 and len(p[2]) == 2 for p in
                                 cluster.partitions(topic).values()), 15, "leaders and ISRs")
    return topic


def write(cluster: Cluster, topic: str, values: list[bytes], acks: str = "all") -> None:
    """Each value to every partition, in batches of BATCH bytes; every write is
    acknowledged."""
    producer = Producer(client_config(cluster.bootstrap, **{
        "acks": acks, "enable.idempotence": acks == "all", "linger.ms": 100,
        "batch.size": BATCH, "compression.type": "none", "message.timeout.ms": 30_000}))
    failed: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    for value in values:
        for partition in range(PARTITIONS):
            producer.produce(topic, value, partition=partition, on_delivery=report)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not failed, f"acks={acks} produces failed: {failed[:3]}"


def make_values(n: int) -> list[bytes]:
    return [f"{i:06d}".encode() + uuid.uuid4().bytes * (RECORD // 16) for i in range(n)]


def filled_topic(cluster: Cluster) -> tuple[str, list[bytes]]:
    topic = create(cluster)
    values = make_values(RECORDS)
    write(cluster, topic, values)
    return topic, values


def high_watermarks(cluster: Cluster, topic: str) -> list[int]:
    probe = Consumer(client_config(cluster.bootstrap, **{"group.id": "probe"}))
    try:
        return [probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(PARTITIONS)]
    finally:
        probe.close()


def same_files(cluster: Cluster, topic: str) -> bool:
    """Broker 2's copy of every partition is the leader's, byte for byte."""
    for p in range(PARTITIONS):
        logs = [b"".join(f.read_bytes() for f in sorted(
            (cluster.broker(n).data_dir / f"{topic}-{p}").glob("*.log"))) for n in (1, 2)]
        if logs[0] != logs[1]:
            return False
    return True


def test_followers_with_fetch_limits_below_a_batch_replicate_every_partition(
        cluster: Cluster) -> None:
    topic, _ = filled_topic(cluster)
    # every acks=all write was acknowledged, so the high watermark (the follower's log
    # end, as it is in the ISR) is at the leader's log end on every partition
    assert high_watermarks(cluster, topic) == [RECORDS] * PARTITIONS
    assert all(set(isr) == {1, 2} for _, _, isr in cluster.partitions(topic).values())
    cluster.wait_for(lambda: same_files(cluster, topic), 15, "broker 2's copy")


def test_a_follower_back_from_a_stop_catches_up_every_partition(cluster: Cluster) -> None:
    """Out of the ISR, the follower's fetches do not move the high watermark: nothing
    but the leader's turn-taking brings a partition it left behind back (it stalled
    after its first batch when the response budget went to another partition)."""
    topic = create(cluster)
    backlog = make_values(RECORDS)
    cluster.stop(2)
    try:
        cluster.wait_for(lambda: all(isr == (1,) for _, _, isr in
                                     cluster.partitions(topic, 1).values()), 30,
                         "the ISR to shrink to the leader")
        write(cluster, topic, backlog, acks="1")
    finally:
        cluster.start(2)
    cluster.wait_for(lambda: all(set(isr) == {1, 2} for _, _, isr in
                                 cluster.partitions(topic).values()), 30,
                     "broker 2 back in every partition's ISR")
    more = make_values(RECORDS // 4)
    write(cluster, topic, more)  # acks=all with min.insync.replicas 2
    assert high_watermarks(cluster, topic) == [RECORDS + len(more)] * PARTITIONS
    cluster.wait_for(lambda: same_files(cluster, topic), 15, "broker 2's copy")
