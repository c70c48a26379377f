"""A new topic with many replicated partitions on a real cluster: every broker follows
the leaders the controller wrote, however those reach it. The controller's own broker
learns them from its controller a moment after the topic itself, while it is still
opening the topic's logs in slices; opening must not then apply the image it started
from (no leaders), which left that broker following nobody and acks=all writes waiting
for it until they timed out."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from tests.cluster.harness import Cluster, quiet_stderr

pytestmark = pytest.mark.timeout(240)

PARTITIONS = 600  # more than one slice of opening on each broker


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("new-topic"), size=3) as c, quiet_stderr():
        yield c


def test_every_partition_of_a_big_new_topic_takes_acks_all_writes(cluster: Cluster) -> None:
    controller = cluster.admin().list_topics(timeout=10).controller_id
    admin = cluster.admin(controller)  # its broker publishes the topic before the states
    admin.create_topics([NewTopic("wide", PARTITIONS, 3)])["wide"].result(60)
    cluster.wait_for(lambda: len(cluster.partitions("wide")) == PARTITIONS and all(
        leader > 0 for leader, _, _ in cluster.partitions("wide").values()), 60, "leaders")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "linger.ms": 20, "message.timeout.ms": 60_000})
    failed: list[str] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            failed.append(str(err))

    for p in range(PARTITIONS):
        producer.produce("wide", b"x", partition=p, on_delivery=delivered)
    left = producer.flush(90)
    del producer  # closed now, not when the cluster is gone
    assert left == 0 and failed == []
    # and no broker lost a leader it had learned (no broker stopped, no epoch changed)
    for node_id in cluster.alive():
        known: set[str] = set()
        log = cluster.broker(node_id).log_path.read_text(errors="replace")
        for line in log.splitlines():
            if (m := re.search(r"(?:leading|following) (wide-\d+) ", line)):
                known.add(m.group(1))
            elif (m := re.search(r"(wide-\d+) has no leader", line)) and m.group(1) in known:
                raise AssertionError(f"broker {node_id} forgot the leader: {line}")
