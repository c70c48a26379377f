"""A three-broker odradek cluster on a real ZooKeeper, driven by confluent-kafka clients.

One cluster for the module (racks r1, r1, r2); each test leaves every broker running.
What is checked here is metadata: who leads, who is in sync, who controls. Whether data
survives a failover is the replication tests' business.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tests.cluster.harness import Cluster, client_config, quiet_stderr

pytestmark = pytest.mark.timeout(180)
RACKS = {1: "r1", 2: "r1", 3: "r2"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("cluster"), size=3, racks=RACKS) as c, \
            quiet_stderr():
        yield c


def create(c: Cluster, name: str, partitions: int = 1, rf: int = 3, via: int | None = None,
           assignment: list[list[int]] | None = None, configs: dict[str, str] | None = None
           ) -> None:
    admin = c.admin(via)
    topic = (NewTopic(name, len(assignment), replica_assignment=assignment, config=configs or {})
             if assignment
             else NewTopic(name, partitions, rf, config=configs or {}))
    admin.create_topics([topic])[name].result(15)
    c.wait_for(lambda: all(p[0] >= 0 for p in c.partitions(name, via).values()),
               15, f"leaders for {name}")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def test_topic_created_through_one_broker_is_described_identically_by_all(
        cluster: Cluster) -> None:
    name = unique("orders")
    create(cluster, name, partitions=6, rf=3, via=1)
    seen = {i: cluster.partitions(name, i) for i in (1, 2, 3)}
    assert seen[1] == seen[2] == seen[3]
    assert {leader for leader, _, _ in seen[1].values()} == {1, 2, 3}
    assert all(sorted(r) == [1, 2, 3] and sorted(isr) == [1, 2, 3]
               for _, r, isr in seen[1].values())
    # and every broker reports every broker and the same controller
    described = [cluster.describe(i) for i in (1, 2, 3)]
    assert {d.controller.id for d in described} == {described[0].controller.id}
    assert all({n.id for n in d.nodes} == {1, 2, 3} for d in described)
    assert len({d.cluster_id for d in described}) == 1


def test_rack_aware_placement_spans_both_racks(cluster: Cluster) -> None:
    name = unique("racked")
    create(cluster, name, partitions=6, rf=2)
    for _, replicas, _ in cluster.partitions(name).values():
        assert {RACKS[r] for r in replicas} == {"r1", "r2"}


def test_killing_the_controller_elects_another(cluster: Cluster) -> None:
    old = cluster.describe().controller.id
    other = next(i for i in (1, 2, 3) if i != old)
    killed = time.monotonic()
    cluster.kill(old)
    new = cluster.wait_for(lambda: (cluster.describe(other).controller or None) and
                           cluster.describe(other).controller.id not in (old, -1) and
                           cluster.describe(other).controller.id, 30, "a new controller")
    elapsed = time.monotonic() - killed
    assert new != old
    # the session timeout (4 s here) bounds how long a dead controller goes unnoticed
    assert elapsed < 15, elapsed
    # the new controller works: a topic created now gets leaders
    create(cluster, unique("after-failover"), partitions=2, rf=2, via=other)
    cluster.start(old)
    cluster.wait_formed()


def test_killing_a_leader_moves_leadership_and_clients_carry_on(cluster: Cluster) -> None:
    name = unique("failover")
    create(cluster, name, partitions=1, rf=3)
    producer = Producer(client_config(cluster.bootstrap, acks="all", **{
        "linger.ms": 5, "message.timeout.ms": 60_000}))
    failed: list[object] = []

    def report(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    for i in range(50):
        producer.produce(name, f"before-{i}".encode(), on_delivery=report)
    assert producer.flush(30) == 0 and not failed
    # a group reads before the kill: __consumer_offsets exists (it needs all 3 brokers
    # alive to be created, offsets.topic.replication.factor=3, as in Kafka)
    assert b"before-49" in consume(cluster, name, b"before-49")
    leader, _, isr = cluster.partitions(name)[0]
    killed = time.monotonic()
    cluster.kill(leader)
    def led_elsewhere() -> tuple[int, tuple[int, ...], tuple[int, ...]] | None:
        state = cluster.partitions(name)[0]
        return state if state[0] not in (leader, -1) else None

    moved = cluster.wait_for(led_elsewhere, 30, "a new leader")
    elapsed = time.monotonic() - killed
    new_leader, _, new_isr = moved
    assert new_leader in isr and leader not in new_isr
    assert elapsed < 15, elapsed
    for i in range(50):
        producer.produce(name, f"after-{i}".encode(), on_delivery=report)
    assert producer.flush(30) == 0 and not failed
    got = consume(cluster, name, b"after-49")
    assert b"after-49" in got
    cluster.start(leader)
    cluster.wait_formed()


def consume(c: Cluster, topic: str, until: bytes, timeout: float = 30.0) -> list[bytes]:
    """A new group reads `topic` from the start until it sees `until`."""
    consumer = Consumer(client_config(c.bootstrap, **{
        "group.id": unique("g"), "auto.offset.reset": "earliest",
        "enable.auto.commit": False}))
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and until not in got:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value() or b"")
    finally:
        consumer.close()
    return got


def set_topic_config(c: Cluster, topic: str, name: str, value: str) -> None:
    admin = c.admin()
    entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("topic", topic, incremental_configs=[entry])
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(10)


def test_unclean_election_waits_for_the_last_in_sync_replica_unless_enabled(
        cluster: Cluster) -> None:
    name = unique("rack-power")
    create(cluster, name, assignment=[[2, 3]],
           configs={"unclean.leader.election.enable": "false"})
    cluster.stop(3)  # the follower goes first: the ISR shrinks to the leader
    cluster.wait_for(lambda: cluster.partitions(name, 1)[0][2] == (2,), 20, "ISR [2]")
    cluster.stop(2)  # then the last in-sync replica
    cluster.wait_for(lambda: cluster.partitions(name, 1)[0][0] == -1, 20, "no leader")
    cluster.start(3)
    cluster.wait_for(lambda: 3 in {n.id for n in cluster.describe(1).nodes}, 20)
    time.sleep(2)  # the controller had every chance to elect 3: it must not
    assert cluster.partitions(name, 1)[0][0] == -1
    admin = cluster.admin(1)
    error = admin.list_topics(name, timeout=5).topics[name].partitions[0].error
    assert error is not None and error.code() == KafkaError.LEADER_NOT_AVAILABLE
    # with unclean election on, the out-of-sync replica takes over
    set_topic_config(cluster, name, "unclean.leader.election.enable", "true")
    cluster.wait_for(lambda: cluster.partitions(name, 1)[0][0] == 3, 20, "unclean leader 3")
    cluster.start(2)
    cluster.wait_formed()


def test_clean_election_when_the_last_in_sync_replica_returns(cluster: Cluster) -> None:
    name = unique("returns")
    create(cluster, name, assignment=[[2, 3]])
    cluster.stop(3)
    cluster.wait_for(lambda: cluster.partitions(name, 1)[0][2] == (2,), 20, "ISR [2]")
    cluster.stop(2)
    cluster.wait_for(lambda: cluster.partitions(name, 1)[0][0] == -1, 20, "no leader")
    cluster.start(2)
    cluster.wait_for(lambda: cluster.partitions(name, 1)[0][0] == 2, 20, "2 leads again")
    cluster.start(3)
    cluster.wait_formed()
