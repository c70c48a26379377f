"""Client quotas on a ZooKeeper cluster, in Kafka's layout: AlterClientQuotas through one
broker writes `/config/users/<u>[/clients/<c>]` and `/config/clients/<c>` as Kafka's
AdminZkClient does (a config znode and a change notification), keeping a user's other
keys, controller_mutation_rate as the other quotas; every broker serves them, and one
written into ZooKeeper by another tool is picked up by every broker."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from tests.cluster.harness import Cluster
from tests.quotas.test_client_quotas_admin import Quotas
from tests.wire import WireClient

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def zk_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("zk-quotas"), size=2) as c:
        yield c


def _described(bootstrap: str) -> dict[tuple[tuple[str, Any], ...], dict[str, float]]:
    """DescribeClientQuotas of everything, asked of this one broker."""
    with WireClient(bootstrap) as client:
        response = client.call(48, 1, components=(), strict=False)
    assert response.error_code == 0, response.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity):
            {v.key: v.value for v in entry.values} for entry in response.entries}


def test_quotas_live_in_kafkas_znodes_and_every_broker_serves_them(
        zk_cluster: Cluster) -> None:
    zk = KazooClient(hosts=zk_cluster.connect)
    zk.start(10)
    try:
        # a user znode holding another key already (as a SCRAM credential would)
        zk.create("/config/users/alice", json.dumps(
            {"version": 1, "config": {"SCRAM-SHA-512": "salt=x,iterations=4096"}}).encode(),
            makepath=True)
        q = Quotas(zk_cluster.broker(1).bootstrap)
        assert q.alter({"user": "alice"}, {"producer_byte_rate": 1024})[0] == 0
        assert q.alter({"user": "alice", "client-id": None},
                       {"request_percentage": 25.5})[0] == 0
        assert q.alter({"client-id": "builder"}, {"controller_mutation_rate": 10})[0] == 0
        q.close()
        data, _ = zk.get("/config/users/alice")
        assert json.loads(data) == {"version": 1, "config": {
            "SCRAM-SHA-512": "salt=x,iterations=4096", "producer_byte_rate": "1024"}}
        data, _ = zk.get("/config/users/alice/clients/<default>")
        assert json.loads(data)["config"] == {"request_percentage": "25.5"}
        data, _ = zk.get("/config/clients/builder")
        assert json.loads(data)["config"] == {"controller_mutation_rate": "10.0"}
        changes = [json.loads(zk.get(f"/config/changes/{c}")[0])["entity_path"]
                   for c in zk.get_children("/config/changes")]
        assert "users/alice" in changes and "users/alice/clients/<default>" in changes
        expected = {(("user", "alice"),): {"producer_byte_rate": 1024.0},
                    (("client-id", "builder"),): {"controller_mutation_rate": 10.0},
                    (("user", "alice"), ("client-id", None)): {"request_percentage": 25.5}}
        assert zk_cluster.wait_for(
            lambda: _described(zk_cluster.broker(2).bootstrap) == expected or None, 30)
        # written into ZooKeeper by another tool: every broker picks it up
        zk.create("/config/clients/batch", json.dumps(
            {"version": 1, "config": {"consumer_byte_rate": "2048"}}).encode(), makepath=True)
        for node in (1, 2):
            assert zk_cluster.wait_for(lambda node=node: _described(  # type: ignore[misc]
                zk_cluster.broker(node).bootstrap).get((("client-id", "batch"),)), 30) == {
                "consumer_byte_rate": 2048.0}
        # removing a key keeps the user's other keys
        q = Quotas(zk_cluster.broker(2).bootstrap)
        assert q.alter({"user": "alice"}, {"producer_byte_rate": None})[0] == 0
        q.close()
        data, _ = zk.get("/config/users/alice")
        assert json.loads(data)["config"] == {"SCRAM-SHA-512": "salt=x,iterations=4096"}
        assert zk_cluster.wait_for(lambda: (("user", "alice"),) not in _described(
            zk_cluster.broker(1).bootstrap) or None, 30)
    finally:
        zk.stop()
