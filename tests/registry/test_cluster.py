"""A registry on each of two brokers of a three-broker cluster serves the same ids, with
`_schemas` replicated three ways."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cluster.harness import Cluster
from tests.registry.conftest import RegistryProcess, api


@pytest.mark.slow  # a ZooKeeper and three brokers; test_instances.py is the short one
def test_registries_on_different_brokers_serve_the_same_ids(tmp_path: Path) -> None:
    with Cluster(tmp_path, size=3) as cluster:
        cluster.wait_formed()
        one = RegistryProcess(cluster.broker(1).bootstrap, tmp_path)
        three = RegistryProcess(cluster.broker(3).bootstrap, tmp_path)
        try:
            one.start().wait_for_leader()
            three.start().wait_for_leader()
            ids = []
            for n, instance in enumerate((one, three, one, three)):
                schema = json.dumps({"type": "record", "name": f"R{n}",
                                     "fields": [{"name": "a", "type": "long"}]})
                r = api("POST", f"{instance.url}/subjects/s{n}/versions", {"schema": schema})
                assert r.status_code == 200, r.text
                ids.append(r.json()["id"])
            assert len(set(ids)) == 4
            for n, schema_id in enumerate(ids):
                for instance in (one, three):
                    assert api("GET", f"{instance.url}/subjects/s{n}/versions/1").json()[
                        "id"] == schema_id
            _, replicas, _ = cluster.partitions("_schemas")[0]
            assert len(replicas) == 3
        finally:
            one.stop()
            three.stop()
