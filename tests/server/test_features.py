"""Feature flags as a Kafka 4 broker reports and changes them (ApiVersions v3+ and
UpdateFeatures (57)): kafka-python's describe_features/update_features, the raw wire
at every version, levels that survive a restart, and ZooKeeper's /feature znode seen
by every broker. Debian's kcat reading the same ApiVersions: tests/clients/test_kcat.py."""

from __future__ import annotations

import asyncio
import datetime
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidUpdateVersionError

from odradek.cluster import zk_data as zd
from odradek.protocol.errors import ErrorCode, KafkaError
from tests.cluster.harness import Cluster
from tests.cluster.inproc import Node, until
from tests.conftest import BrokerProcess
from tests.transactions.helpers import create_topic, unique
from tests.transactions.test_protocol import (
    add_partitions,
    find_txn_coordinator,
    init,
    produce,
    txn_batch,
)
from tests.transactions.test_tv2 import end_txn_v5
from tests.wire import WireClient
from tests.zk import ZooKeeperProcess, zookeeper  # noqa: F401 - fixture


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield a
    a.close()


def test_kafka_python_reads_the_finalized_features(admin: KafkaAdminClient) -> None:
    features = admin.describe_features()
    assert features["metadata.version"] == {"supported": (25, 25), "finalized": (25, 25),
                                            "finalized_epoch": 1}
    assert features["group.version"]["finalized"] == (1, 1)
    # KIP-890 part 2, finalized at 2 as Kafka 4 finalizes it for a new cluster
    assert features["transaction.version"]["supported"] == (0, 2)
    assert features["transaction.version"]["finalized"] == (2, 2)


def test_an_update_to_the_current_level_is_accepted(admin: KafkaAdminClient) -> None:
    assert admin.update_features({"group.version": 1, "metadata.version": 25}) == {
        "group.version": "OK", "metadata.version": "OK"}
    assert admin.describe_features()["metadata.version"]["finalized_epoch"] == 1


@pytest.mark.parametrize(("update", "why"), [
    ({"group.version": ("SAFE_DOWNGRADE", 0)},
     "Invalid update version 0 for feature group.version. Local controller 1 only "
     "supports versions 1-1"),
    ({"transaction.version": 1},
     "Invalid update version 1 for feature transaction.version. Can't downgrade the "
     "version of this feature without setting the upgrade type to either safe or unsafe "
     "downgrade."),
    ({"transaction.version": 3}, "only supports versions 0-2"),
    ({"metadata.version": ("UNSAFE_DOWNGRADE", 24)}, "only supports versions 25-25"),
    ({"no.such.feature": 1}, "Local controller 1 does not support this feature."),
])
def test_a_refused_update_changes_nothing(admin: KafkaAdminClient,
                                          update: dict[str, object], why: str) -> None:
    with pytest.raises(InvalidUpdateVersionError, match=why.replace(".", r"\.")):
        admin.update_features(update)
    features = admin.describe_features()
    assert features["transaction.version"]["finalized"] == (2, 2)
    assert features["group.version"]["finalized"] == (1, 1)


def _update(w: WireClient, version: int, *updates: tuple[str, int, int],
            validate_only: bool = False) -> Any:
    m = w.schema(57, version)
    keys = tuple(
        m.FeatureUpdateKey(feature=name, max_version_level=level,
                           **({"allow_downgrade": kind != 1} if version == 0
                              else {"upgrade_type": kind}))
        for name, level, kind in updates)
    return w.call(57, version, timeout=datetime.timedelta(seconds=5), feature_updates=keys,
                  **({"validate_only": validate_only} if version else {}))


def _finalized(w: WireClient) -> tuple[dict[str, int], int]:
    r = w.call(18, 3, client_software_name="t", client_software_version="1")
    return ({f.name: f.max_version_level for f in r.finalized_features},
            r.finalized_features_epoch)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_one_refused_feature_fails_the_request_at_the_top_level(broker: BrokerProcess,
                                                                version: int) -> None:
    """Kafka 4's controller: no rows on failure at any version; rows of NONE for a
    success at v0 and v1 only."""
    with WireClient(broker.bootstrap) as w:
        response = _update(w, version, ("group.version", 1, 1), ("metadata.version", 30, 1))
        ok = _update(w, version, ("group.version", 1, 1))
    assert (response.error_code, response.error_message) == (
        ErrorCode.invalid_update_version,
        "The update failed for all features since the following feature had an error: "
        "Invalid update version 30 for feature metadata.version. Local controller 1 only "
        "supports versions 25-25")
    assert tuple(getattr(response, "results", ())) == ()
    assert ok.error_code == ErrorCode.none
    assert [(r.feature, r.error_code) for r in getattr(ok, "results", ())] == (
        [("group.version", ErrorCode.none)] if version <= 1 else [])


def test_transaction_version_moves_both_ways_and_survives_a_restart(
        fresh_broker: BrokerProcess) -> None:
    b = fresh_broker.start()
    with WireClient(b.bootstrap) as w:
        # validate_only checks and stores nothing
        assert _update(w, 1, ("transaction.version", 1, 2),
                       validate_only=True).error_code == ErrorCode.none
        assert _finalized(w) == ({"group.version": 1, "metadata.version": 25,
                                  "transaction.version": 2}, 1)
        assert _update(w, 2, ("transaction.version", 1, 2)).error_code == ErrorCode.none
        assert _finalized(w) == ({"group.version": 1, "metadata.version": 25,
                                  "transaction.version": 1}, 2)
        # a downgrade must lower the level
        r = _update(w, 1, ("transaction.version", 2, 3))
        assert (r.error_code, r.error_message) == (
            ErrorCode.invalid_update_version,
            "The update failed for all features since the following feature had an error: "
            "Invalid update version 2 for feature transaction.version. Can't downgrade to "
            "a newer version.")
        # level 0: not listed as finalized, as Kafka leaves it out
        assert _update(w, 0, ("transaction.version", 0, 2)).error_code == ErrorCode.none
        assert "transaction.version" not in _finalized(w)[0]
    b.restart()  # the stored levels, not a new cluster's, and the epoch go on
    with WireClient(b.bootstrap) as w:
        assert _finalized(w) == ({"group.version": 1, "metadata.version": 25}, 3)
        assert _update(w, 1, ("transaction.version", 2, 1)).error_code == ErrorCode.none
        assert _finalized(w) == ({"group.version": 1, "metadata.version": 25,
                                  "transaction.version": 2}, 4)


def test_at_transaction_version_1_the_coordinators_own_abort_keeps_the_epoch(
        fresh_broker: BrokerProcess) -> None:
    """The level decides the coordinator's own aborts; an EndTxn v5 is version 2's
    whatever the level, as Kafka's transactionVersionForEndTxn decides it."""
    b = fresh_broker.start()
    topic = create_topic(b.bootstrap, unique("tv1"))
    with WireClient(b.bootstrap) as w:
        assert _update(w, 1, ("transaction.version", 1, 2)).error_code == ErrorCode.none
        tid = unique("tx")
        find_txn_coordinator(w, tid)
        _, pid, old = init(w, tid)
        assert add_partitions(w, tid, pid, old, [(topic, 0)]) == {(topic, 0): ErrorCode.none}
        assert produce(w, topic, txn_batch(pid, old, 0, "a"), tid) == (ErrorCode.none, 0)
        code, pid2, new = init(w, tid)  # another instance fences and aborts the first
        # the fence (+1) and the new instance's epoch (+1); at level 2 the abort adds one
        # more (tests/transactions/test_protocol.py::test_a_zombie_is_fenced_…)
        assert (code, pid2, new) == (ErrorCode.none, pid, old + 2)
        assert add_partitions(w, tid, pid, new, [(topic, 0)]) == {(topic, 0): ErrorCode.none}
        assert end_txn_v5(w, tid, pid, new, commit=True) == (ErrorCode.none, pid, new + 1)


@pytest.mark.parametrize("version", [0, 2, 3, 4])
def test_features_ride_in_api_versions_v3_and_later(broker: BrokerProcess,
                                                   version: int) -> None:
    with WireClient(broker.bootstrap) as w:
        fields = {"client_software_name": "librdkafka", "client_software_version": "2.0.2"}
        response = w.call(18, version, **(fields if version >= 3 else {}))
    assert response.error_code == ErrorCode.none
    names = [f.name for f in getattr(response, "finalized_features", ())]
    assert names == (["group.version", "metadata.version", "transaction.version"]
                     if version >= 3 else [])


def test_zookeeper_keeps_the_levels_in_kafkas_feature_znode_seen_by_every_broker(
        zookeeper: ZooKeeperProcess) -> None:  # noqa: F811
    connect = f"{zookeeper.connect}/t{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        nodes = [await Node(connect, i + 1).start() for i in range(2)]
        try:
            assert nodes[1].image.features == {"group.version": 1, "metadata.version": 25,
                                               "transaction.version": 2}
            epoch = nodes[1].image.features_epoch
            await nodes[0].store.set_features({**nodes[0].image.features,
                                               "transaction.version": 1})
            await until(lambda: nodes[1].image.features.get("transaction.version") == 1,
                        what="the other broker to see the new level")
            assert nodes[1].image.features_epoch == epoch + 1  # the znode's version
            # an update checked against an image that is no longer current is refused
            nodes[1].store.cache.features_epoch = epoch  # as if its watch had not fired yet
            with pytest.raises(KafkaError) as refused:
                await nodes[1].store.set_features({"transaction.version": 2})
            assert refused.value.code == ErrorCode.feature_update_failed
            assert nodes[1].image.features_epoch == epoch + 1  # read again
            raw, _ = nodes[1].session.get(zd.FEATURE)
            assert json.loads(raw) == {"version": 2, "status": 1, "features": {
                "group.version": {"max_version_level": 1},
                "metadata.version": {"max_version_level": 25},
                "transaction.version": {"max_version_level": 1}}}
        finally:
            for n in nodes:
                n.stop()
        restarted = await Node(connect, 3).start()  # a broker joining later reads it
        try:
            assert restarted.image.features["transaction.version"] == 1
        finally:
            restarted.stop()

    asyncio.run(main())


@pytest.mark.slow
def test_a_level_set_through_one_broker_is_reported_by_every_broker(tmp_path: Path) -> None:
    """Three real brokers on ZooKeeper: the downgrade through broker 1 reaches the others
    through the watched /feature znode, and a restarted broker reads it back."""
    def tv(node: int) -> int | None:
        with WireClient(cluster.broker(node).bootstrap) as w:
            return _finalized(w)[0].get("transaction.version")

    with Cluster(tmp_path, size=3) as cluster:
        with WireClient(cluster.broker(1).bootstrap) as w:
            assert _update(w, 1, ("transaction.version", 1, 2)).error_code == ErrorCode.none
        for node in (1, 2, 3):
            cluster.wait_for(lambda n=node: tv(n) == 1, what=f"broker {node} to report 1")
        cluster.stop(3)
        cluster.start(3)
        assert tv(3) == 1
