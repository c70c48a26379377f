"""The leader's own ISR check on a real cluster: a follower that stops fetching (frozen
with SIGSTOP, so its ZooKeeper session stays alive far longer) leaves the ISR after
`replica.lag.time.max.ms`, acks=all goes on without it, and it rejoins once it catches up."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from odradek.protocol.errors import ErrorCode
from tests.cluster.harness import Cluster, quiet_stderr
from tests.replication.test_cluster_replication import consume_all, create, raw_produce

pytestmark = pytest.mark.timeout(180)

LAG_MS = 1500
SESSION_MS = 30_000  # far longer than the test: only the leader's timer can shrink the ISR


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    configs = {"replica.lag.time.max.ms": str(LAG_MS),
               "zookeeper.session.timeout.ms": str(SESSION_MS)}
    with Cluster(tmp_path_factory.mktemp("isr"), size=3, configs=configs) as c, \
            quiet_stderr():
        yield c


def test_a_frozen_follower_leaves_the_isr_after_the_lag_time_and_rejoins(
        cluster: Cluster) -> None:
    topic = create(cluster, [1, 2, 3])
    leader = cluster.broker(1).bootstrap
    assert raw_produce(leader, topic, b"before", -1) == ErrorCode.none
    frozen = cluster.broker(3).proc
    frozen.send_signal(signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:
        cluster.wait_for(lambda: cluster.partitions(topic, 1)[0][2] == (1, 2), 15,
                         "broker 3 out of the ISR")
        took = time.monotonic() - stopped_at
        print(f"\nISR shrank {took:.2f}s after the follower froze "
              f"(replica.lag.time.max.ms={LAG_MS})")
        assert LAG_MS / 1000 <= took < SESSION_MS / 1000
        assert "have not caught up" in cluster.logs(1)
        # acks=all now waits for brokers 1 and 2 only
        assert raw_produce(leader, topic, b"while-frozen", -1) == ErrorCode.none
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    cluster.wait_for(lambda: set(cluster.partitions(topic, 1)[0][2]) == {1, 2, 3}, 30,
                     "broker 3 back in the ISR")
    assert consume_all(cluster, topic, 2) == [b"before", b"while-frozen"]
