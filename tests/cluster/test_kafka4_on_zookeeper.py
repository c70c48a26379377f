"""Kafka 4 features on a ZooKeeper cluster of three brokers (one cluster for both, to
keep the default suite short):
- transaction version 2: partition leaders add partitions to a transaction whose
  coordinator is another broker (AddPartitionsToTxn v5 between brokers), and the
  markers carrying the bumped epoch reach leaders other than the coordinator;
- client-metrics subscriptions (KIP-714) kept in `/config/client-metrics/<name>` as
  Kafka's ZooKeeper mode kept them, and served by every broker.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka.admin import NewTopic
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kazoo.client import KazooClient

from odradek.protocol.errors import ErrorCode
from tests.cluster.harness import Cluster
from tests.transactions.helpers import read_all, unique, values
from tests.transactions.test_protocol import (
    add_partitions,
    end_txn,
    init,
    produce,
    txn_batch,
)
from tests.transactions.test_tv2 import committed, end_txn_v5, produce_v12, txn_offset_commit_v5
from tests.wire import WireClient


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("kafka4-zk"), size=3) as c:
        yield c


def coordinator_of(c: Cluster, key: str, key_type: int) -> int:
    """The coordinator as broker 1 names it, once that broker names itself too: the
    controller's broker learns new leaders before the others do."""
    def named_by(node_id: int) -> int | None:
        with WireClient(c.broker(node_id).bootstrap) as w:
            r = w.call(10, 3, key=key, key_type=key_type)
        return int(r.node_id) if r.error_code == ErrorCode.none else None

    def ask() -> int | None:
        node = named_by(1)
        return node if node is not None and named_by(node) == node else None

    return c.wait_for(ask, 30, f"a coordinator for {key}")


def test_leaders_add_partitions_on_the_coordinator_of_another_broker(
        cluster: Cluster) -> None:
    topic = unique("tv2c")
    admin = cluster.admin()  # held until the answer: a dropped client cancels it
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(15)
    leaders = cluster.wait_for(
        lambda: (lambda ps: ps if all(ld > 0 for ld, _, _ in ps.values()) else None)(
            cluster.partitions(topic)), 30, "leaders")
    tid = unique("tx")
    txn_node = coordinator_of(cluster, tid, 1)
    remote = [p for p, (leader, _, _) in leaders.items() if leader != txn_node]
    assert remote, f"every partition of {topic} is led by the coordinator {txn_node}"
    partition, leader = remote[0], leaders[remote[0]][0]
    group = next(g for g in (unique("g") for _ in range(200))
                 if coordinator_of(cluster, g, 0) != txn_node)

    with WireClient(cluster.broker(txn_node).bootstrap) as coord, \
            WireClient(cluster.broker(leader).bootstrap) as lead, \
            WireClient(cluster.broker(coordinator_of(cluster, group, 0)).bootstrap) as gc:
        code, pid, e0 = init(coord, tid, version=5)
        assert code == ErrorCode.none
        assert produce_v12(lead, topic, txn_batch(pid, e0, 0, "kept"), tid, partition) == \
            ErrorCode.none
        assert txn_offset_commit_v5(gc, tid, group, pid, e0, topic, 5) == ErrorCode.none
        assert end_txn_v5(coord, tid, pid, e0, commit=True) == (ErrorCode.none, pid, e0 + 1)
        # the COMMIT marker reached the other leader with the new epoch
        assert produce_v12(lead, topic, txn_batch(pid, e0, 1, "zombie"), tid, partition) == \
            ErrorCode.invalid_producer_epoch
        assert produce_v12(lead, topic, txn_batch(pid, e0 + 1, 0, "dropped"), tid,
                           partition) == ErrorCode.none
        assert end_txn_v5(coord, tid, pid, e0 + 1, commit=False) == \
            (ErrorCode.none, pid, e0 + 2)

    assert values(read_all(cluster.bootstrap, topic, partition)) == ["kept"]
    assert committed(cluster.bootstrap, group, topic) == 5


def test_leaders_verify_a_transaction_version_1_write_with_the_other_coordinator(
        cluster: Cluster) -> None:
    """KIP-890 part 1: before taking a transaction's first batch, a leader that does not
    coordinate the id asks the coordinator (AddPartitionsToTxn v5 verify_only); so does
    a group coordinator before a transactional offset commit."""
    topic = unique("tv1c")
    admin = cluster.admin()  # held until the answer: a dropped client cancels it
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(15)
    leaders = cluster.wait_for(
        lambda: (lambda ps: ps if all(ld > 0 for ld, _, _ in ps.values()) else None)(
            cluster.partitions(topic)), 30, "leaders")
    tid = unique("tx")
    txn_node = coordinator_of(cluster, tid, 1)
    partition, (leader, _, _) = next((p, v) for p, v in leaders.items() if v[0] != txn_node)
    group = next(g for g in (unique("g") for _ in range(200))
                 if coordinator_of(cluster, g, 0) != txn_node)
    with WireClient(cluster.broker(txn_node).bootstrap) as coord, \
            WireClient(cluster.broker(leader).bootstrap) as lead, \
            WireClient(cluster.broker(coordinator_of(cluster, group, 0)).bootstrap) as gc:
        _, pid, epoch = init(coord, tid)
        # not added to the transaction: refused by the leader, nothing written
        assert produce(lead, topic, txn_batch(pid, epoch, 0, "x"), tid, partition)[0] == \
            ErrorCode.invalid_txn_state
        assert txn_offset_commit(gc, tid, group, pid, epoch, topic, version=3) == \
            ErrorCode.invalid_txn_state
        assert add_partitions(coord, tid, pid, epoch, [(topic, partition)]) == {
            (topic, partition): ErrorCode.none}
        assert produce(lead, topic, txn_batch(pid, epoch, 0, "y"), tid, partition)[0] == \
            ErrorCode.none
        assert produce(lead, topic, txn_batch(pid + 1, 0, 0, "z"), tid, partition)[0] == \
            ErrorCode.invalid_producer_id_mapping
        assert end_txn(coord, tid, pid, epoch, commit=True) == ErrorCode.none
    assert values(read_all(cluster.bootstrap, topic, partition)) == ["y"]


def txn_offset_commit(c: WireClient, tid: str, group: str, pid: int, epoch: int,
                      topic: str, version: int) -> ErrorCode:
    """Sent to the group's coordinator, retried while its offsets partition loads."""
    s = c.schema(28, version)

    def sent() -> ErrorCode | None:
        r = c.call(28, version, transactional_id=tid, group_id=group, producer_id=pid,
                   producer_epoch=epoch, generation_id=-1, member_id="",
                   group_instance_id=None, topics=(s.TxnOffsetCommitRequestTopic(
                       name=topic, partitions=(s.TxnOffsetCommitRequestPartition(
                           partition_index=0, committed_offset=1,
                           committed_leader_epoch=-1, committed_metadata=""),)),))
        code = ErrorCode(r.topics[0].partitions[0].error_code)
        return None if code == ErrorCode.coordinator_load_in_progress else code

    return wait_until(sent, 15, "the group coordinator to load")


def wait_until(attempt: Callable[[], ErrorCode | None], timeout: float,
               what: str) -> ErrorCode:
    deadline = time.monotonic() + timeout
    while (code := attempt()) is None:
        assert time.monotonic() < deadline, what
        time.sleep(0.05)
    return code


def push_interval_ms(c: Cluster, node_id: int, software: str) -> float:
    with WireClient(c.broker(node_id).bootstrap) as w:
        w.call(18, 3, client_software_name=software, client_software_version="1.0")
        return float(w.call(71, 0, client_instance_id=None).push_interval
                     .total_seconds() * 1000)


def test_a_client_metrics_subscription_is_kept_in_zookeeper_and_served_by_every_broker(
        cluster: Cluster) -> None:
    name, software = f"sub-{uuid.uuid4().hex[:6]}", f"sw-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=cluster.broker(1).bootstrap)
    try:
        resource = ConfigResource(ConfigResourceType.CLIENT_METRICS, name, configs={
            "metrics": "org.apache.kafka.producer.", "interval.ms": "321",
            "match": f"client_software_name={software}"})
        result = admin.alter_configs([resource], incremental=True)
        assert str(result["client_metrics"][name]) == "OK"
    finally:
        admin.close()
    zk = KazooClient(hosts=cluster.connect)
    zk.start(10)
    try:
        data, _ = zk.get(f"/config/client-metrics/{name}")
        assert json.loads(data) == {"version": 1, "config": {
            "metrics": "org.apache.kafka.producer.", "interval.ms": "321",
            "match": f"client_software_name={software}"}}
        changes = [json.loads(zk.get(f"/config/changes/{n}")[0])
                   for n in zk.get_children("/config/changes")]
        assert {"version": 2, "entity_path": f"client-metrics/{name}"} in changes
    finally:
        zk.stop()
        zk.close()
    for node_id in (1, 2, 3):
        cluster.wait_for(lambda n=node_id: push_interval_ms(cluster, n, software) == 321,
                         30, f"broker {node_id}'s subscription")
    # described through another broker, and emptied there: gone on every broker
    admin = KafkaAdminClient(bootstrap_servers=cluster.broker(3).bootstrap)
    try:
        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.CLIENT_METRICS, name)])
        [by_name] = described.values()
        assert by_name[name]["interval.ms"]["value"] == "321"
        gone = ConfigResource(ConfigResourceType.CLIENT_METRICS, name, configs={
            key: ("DELETE", None) for key in ("metrics", "interval.ms", "match")})
        assert str(admin.alter_configs([gone], incremental=True)
                   ["client_metrics"][name]) == "OK"
    finally:
        admin.close()
    for node_id in (1, 2, 3):
        cluster.wait_for(lambda n=node_id: push_interval_ms(cluster, n, software) != 321,
                         30, f"broker {node_id} to drop the subscription")
