"""Brokers for share group tests: one with Kafka's default record lock (30 s) and one
whose locks expire quickly, for the tests that wait for a lock to time out."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import BrokerProcess, free_port
from tests.share.helpers import new_topic, produce
from tests.wire import WireClient

SHORT_LOCK_MS = 1500
# a small __share_group_state: creating (and, after a restart, loading) Kafka's 50
# partitions costs seconds on a busy machine; the placement is tested with 50 in
# test_share_state.py
STATE_PARTITIONS = {"share.coordinator.state.topic.num.partitions": "4"}


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("share") / "data",
                      overrides={"group.share.heartbeat.interval.ms": "500",
                                 **STATE_PARTITIONS}).start()
    yield b
    b.stop()


@pytest.fixture(scope="package")  # shared by the modules that wait for lock timeouts
def short_lock_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("share-short") / "data",
                      overrides={"metrics.port": str(free_port()),  # test_share_metrics
                                 "group.share.heartbeat.interval.ms": "500",
                                 "group.share.record.lock.duration.ms": str(SHORT_LOCK_MS),
                                 **STATE_PARTITIONS}
                      ).start()
    yield b
    b.stop()


@pytest.fixture
def holder(share_broker: BrokerProcess) -> Any:
    """Member m1 of a new group holding offsets 0-2 of a new topic."""
    bootstrap = share_broker.bootstrap
    topic = new_topic(bootstrap)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with WireClient(bootstrap) as c:
        c.call(10, 4, key_type=0, coordinator_keys=(group,))
        from tests.share.test_share_wire import Share, acquired

        m1 = Share(c, group, "m1")
        m1.join(topic)
        assert m1.fetch().error_code == 0  # opens the session: the start is the log end
        produce(bootstrap, topic, ["a", "b", "c"])
        got: list[tuple[int, int, int]] = []
        while sum(last - first + 1 for first, last, _ in got) < 3:
            r = m1.fetch(wait_ms=5000)
            assert r.error_code == 0, r
            got += acquired(r)
        assert got[0][0] == 0 and got[-1][1] == 2 and all(n == 1 for _, _, n in got)
        yield c, m1, topic
