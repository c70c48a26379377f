"""`odradek cluster up`: one command gives a working three-broker cluster, and Ctrl-C
stops all of it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.harness import client_config, quiet_stderr
from tests.conftest import free_port_run
from tests.processes import started, stop, wait_for_output

pytestmark = pytest.mark.timeout(180)


def test_cluster_up_serves_a_replicated_topic_and_stops_on_sigint(tmp_path: Path) -> None:
    """Started as `cmd &` starts it, with SIGINT ignored: its SIGINT still stops it all."""
    base = free_port_run(4)  # brokers take base, base + 1, base + 2; ZooKeeper base + 3
    zk_port = base + 3
    log_path = tmp_path / "cluster-up.log"
    cmd = [sys.executable, "-m", "odradek", "cluster", "up", "--brokers", "3",
           "--data-dir", str(tmp_path / "c"), "--base-port", str(base),
           "--zookeeper-port", str(zk_port)]
    with started(cmd, log_path, sigint_ignored=True) as proc:
        bootstrap = wait_for_output(proc, log_path, r"bootstrap\.servers=(\S+)").group(1)
        assert len(bootstrap.split(",")) == 3
        with quiet_stderr():
            admin = AdminClient(client_config(bootstrap))
            admin.create_topics([NewTopic("up", 2)])["up"].result(30)
            md = admin.list_topics("up", timeout=10).topics["up"]
            assert all(len(p.replicas) == 3 for p in md.partitions.values())
            producer = Producer(client_config(bootstrap, acks="all"))
            for i in range(10):
                producer.produce("up", f"v{i}".encode(), partition=i % 2)
            assert producer.flush(30) == 0
            consumer = Consumer(client_config(bootstrap, **{
                "group.id": "up", "auto.offset.reset": "earliest"}))
            consumer.assign([TopicPartition("up", p, 0) for p in range(2)])
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < 10 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    got.append(msg.value() or b"")
            consumer.close()
        assert sorted(got) == sorted(f"v{i}".encode() for i in range(10))
        code = stop(proc, signal.SIGINT)  # the brokers and ZooKeeper end with it
    assert code == 0, log_path.read_text(errors="replace")[-3000:]
    assert "stopping" in log_path.read_text(errors="replace")
    leftovers = subprocess.run(["pgrep", "-f", str(tmp_path / "c")], capture_output=True,
                               text=True).stdout.split()
    assert not leftovers, "brokers or ZooKeeper still running after Ctrl-C"
