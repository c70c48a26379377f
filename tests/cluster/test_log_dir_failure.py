"""A failed log dir in a ZooKeeper cluster: the broker tells the controller (Kafka's
/log_dir_event_notification), leadership moves off its replicas within seconds, the
broker stays up, and clients lose nothing acknowledged.

Failing a disk for real needs root and a loop mount (an ext4 image shut down with
EXT4_IOC_SHUTDOWN); without them the test skips."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.clients.test_confluent_kafka import consume_all
from tests.cluster.harness import Cluster, client_config, quiet_stderr
from tests.lifecycle.test_broker_log_dirs import _can_mount, ext4_image, shut_down_ext4

PARTITIONS = 3


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    if not _can_mount(tmp_path):
        pytest.skip("needs root and mount to fail a disk")
    with ext4_image(tmp_path / "disk", tmp_path / "disk.img") as mounted:
        yield mounted


ERRORS: list[str] = []


def _produce(bootstrap: str, topic: str, tag: bytes) -> list[bytes]:
    acked: list[bytes] = []
    p = Producer(client_config(bootstrap, acks="all", **{"enable.idempotence": True,
                                                          "message.timeout.ms": 20000}))
    for part in range(PARTITIONS):
        for i in range(10):
            p.produce(topic, b"%s-%d-%d" % (tag, part, i), partition=part,
                      on_delivery=lambda err, msg: acked.append(msg.value()) if err is None
                      else ERRORS.append(f"{msg.partition()}: {err}"))
    p.flush(30)
    return acked


def test_a_failed_log_dir_moves_leadership_to_the_other_replicas(
        tmp_path: Path, disk: Path) -> None:
    topic = "dir-failure"
    with quiet_stderr(), Cluster(tmp_path / "cluster", size=3,
                                 broker_configs={2: {"log.dirs": str(disk / "data")}}) as c:
        admin = c.admin()
        from confluent_kafka.admin import NewTopic

        # broker 2 first in every assignment: it leads every partition
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=-1,
                                      replica_assignment=[
            [2, 1, 3], [2, 3, 1], [2, 1, 3]], config={"min.insync.replicas": "2"})])[
            topic].result(30)
        c.wait_for(lambda: all(leader == 2 and len(isr) == 3 for leader, _, isr
                               in c.partitions(topic).values()) or None,
                   30, "broker 2 to lead with full ISRs")
        before = _produce(c.bootstrap, topic, b"before")
        assert len(before) == 10 * PARTITIONS

        shut_down_ext4(disk)
        during = _produce(c.bootstrap, topic, b"during")  # the write that finds the EIO

        def moved() -> bool | None:
            parts = c.partitions(topic, node_id=1)
            return all(leader in (1, 3) and 2 not in isr
                       for leader, _, isr in parts.values()) or None

        c.wait_for(moved, 20, "leadership to leave the failed dir")
        assert c.broker(2).alive(), "a broker whose dir failed stays up"
        log_path = c.broker(2).log_path
        assert "told the controller" in log_path.read_text(errors="replace")

        after = _produce(c.bootstrap, topic, b"after")
        assert len(after) == 10 * PARTITIONS, ERRORS
        want = set(before) | set(during) | set(after)
        got = {m.value() for m in consume_all(c.bootstrap, topic, len(want), timeout=30)}
        assert want <= got, "nothing acknowledged was lost"
