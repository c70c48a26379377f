"""Fetch from follower (KIP-392): with `replica.selector.class` set to Kafka's
RackAwareReplicaSelector, a confluent-kafka consumer with `client.rack` is sent to the
replica in its rack and reads everything from it; without a rack match it reads from
the leader. librdkafka's statistics say which broker it fetches from."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.cluster.harness import Cluster, client_config, quiet_stderr

pytestmark = pytest.mark.timeout(180)
RACKS = {1: "r1", 2: "r2", 3: "r3"}
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("racks"), size=3, racks=RACKS,
                 configs={"replica.selector.class": SELECTOR}) as c, quiet_stderr():
        yield c


def consume_all(c: Cluster, topic: str, rack: str, count: int) -> tuple[list[bytes], Any]:
    """Every record of partition 0, and librdkafka's last view of the partition."""
    stats: list[dict[str, Any]] = []
    consumer = Consumer(client_config(c.bootstrap, **{
        "group.id": f"g-{uuid.uuid4().hex[:6]}", "client.rack": rack,
        "enable.auto.commit": False, "statistics.interval.ms": 200,
        "stats_cb": lambda s: stats.append(json.loads(s))}))
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        for _ in range(600):  # bounded: 600 polls of at most 0.2 s
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            if len(got) >= count and stats:
                break
        before = len(stats)
        for _ in range(50):  # one more statistics report, taken after the reads
            consumer.poll(0.1)
            if len(stats) > before:
                break
        view = stats[-1]["topics"][topic]["partitions"]["0"]
        return got, view
    finally:
        consumer.close()


def test_a_consumer_reads_from_the_follower_in_its_rack(cluster: Cluster) -> None:
    topic = f"racked-{uuid.uuid4().hex[:6]}"
    admin = cluster.admin()
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2, 3]])])[topic].result(15)
    cluster.wait_for(lambda: all(len(isr) == 3 and leader == 1
                                 for leader, _, isr in cluster.partitions(topic).values()),
                     30, f"{topic} led by 1 with every replica in sync")
    producer = Producer(client_config(cluster.bootstrap, acks="all"))
    values = [f"v{i}".encode() for i in range(200)]
    for v in values:
        producer.produce(topic, v, partition=0)
    assert producer.flush(30) == 0

    got, view = consume_all(cluster, topic, "r2", len(values))
    assert got == values
    assert (view["leader"], view["broker"]) == (1, 2)  # fetched from the follower

    got, view = consume_all(cluster, topic, "r1", len(values))
    assert got == values
    assert (view["leader"], view["broker"]) == (1, 1)  # the leader is in its rack
