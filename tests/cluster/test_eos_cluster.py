"""Exactly once on three brokers: the consume-transform-produce loop with the group's
coordinator and the transactional id's coordinator on different brokers and on the
same one, with aborted transactions, and (slow) with a coordinator SIGKILLed.

Ids are placed by asking FindCoordinator: candidates are drawn until the group's and
the transactional id's coordinators are apart (or together) as the test wants. The
worker is tests/transactions/eos_worker.py (confluent-kafka), aborting every fourth
transaction and reading its batch again. Read with read_committed, the output holds
every input record exactly once, in input order per partition.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from odradek.protocol.errors import ErrorCode
from tests.cluster.harness import Cluster, client_config, quiet_stderr
from tests.processes import reap_on_exit
from tests.transactions.helpers import read_all, unique
from tests.wire import WireClient

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 3

@pytest.fixture(scope="module")
def eos_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("eos-cluster"), size=3, configs={
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}) as c:
        yield c


def coordinator(cluster: Cluster, key: str, key_type: int, not_on: int | None = None) -> int:
    """The node FindCoordinator names for a group (0) or a transactional id (1), once it
    is not `not_on`."""
    def ask() -> int | None:
        node = cluster.alive()[0]
        with WireClient(cluster.broker(node).bootstrap) as w:
            r = w.call(10, 3, key=key, key_type=key_type)
        found = int(r.node_id) if r.error_code == ErrorCode.none else None
        return None if found == not_on else found

    return cluster.wait_for(ask, 30, f"a coordinator for {key}")


def placed(cluster: Cluster, together: bool) -> tuple[str, str, int, int]:
    """(group id, transactional id, group coordinator, transaction coordinator)."""
    txn = unique("eos-tx")
    txn_node = coordinator(cluster, txn, 1)
    for _ in range(200):
        group = unique("eos-g")
        group_node = coordinator(cluster, group, 0)
        if (group_node == txn_node) == together:
            return group, txn, group_node, txn_node
    raise AssertionError("no group id placed as wanted in 200 tries")


def start_worker(bootstrap: str, names: dict[str, str], log_path: Path
                 ) -> subprocess.Popen[bytes]:
    log = open(log_path, "ab")  # noqa: SIM115 - lives as long as the process
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.transactions.eos_worker", "--bootstrap", bootstrap,
         "--input", names["input"], "--output", names["output"], "--group", names["group"],
         "--transactional-id", names["txn"], "--batch", "10", "--pause", "0.02",
         "--abort-every", "4"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        env=dict(os.environ, PYTHONUNBUFFERED="1"))
    reap_on_exit(worker)
    return worker


def committed(admin: Any, group: str, topic: str) -> int:
    """How many input records the group's committed offsets (moved only by committed
    transactions) have passed."""
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
    try:
        result = admin.list_consumer_group_offsets(
            [request], require_stable=False)[group].result(10)
    except (KafkaException, TimeoutError):
        return 0  # its coordinator is moving
    return sum(max(tp.offset, 0) for tp in result.topic_partitions)


def run_loop(cluster: Cluster, tmp_path: Path, together: bool, records: int,
             kill: str | None = None, deadline_s: float = 120) -> None:
    group, txn, group_node, txn_node = placed(cluster, together)
    names = {"input": unique("eos-in"), "output": unique("eos-out"), "group": group,
             "txn": txn}
    admin = cluster.admin()
    futures = admin.create_topics([NewTopic(names[k], PARTITIONS, 3)
                                   for k in ("input", "output")])
    for f in futures.values():
        f.result(15)
    bootstrap = cluster.bootstrap
    p = Producer(client_config(bootstrap, **{"linger.ms": 5}))
    for i in range(records):
        p.produce(names["input"], key=str(i).encode(), value=f"r{i}".encode(),
                  partition=i % PARTITIONS)
    assert p.flush(30) == 0

    log_path = tmp_path / "worker.log"
    started = time.monotonic()
    worker = start_worker(bootstrap, names, log_path)
    killed: int | None = None
    restarts = 0
    try:
        if kill is not None:
            victim = group_node if kill == "group" else txn_node
            cluster.wait_for(lambda: committed(admin, group, names["input"]) >= records // 4,
                             60, "a quarter of the input committed")
            with quiet_stderr():
                cluster.kill(victim)
                killed = victim
                coordinator(cluster, group if kill == "group" else txn,
                            0 if kill == "group" else 1, not_on=victim)
        while committed(admin, group, names["input"]) < records:
            assert time.monotonic() - started < deadline_s, \
                f"output incomplete after {deadline_s}s:\n{log_path.read_text()[-3000:]}"
            if worker.poll() is not None:  # failed (status 3): restart it, as a supervisor
                worker = start_worker(cluster.bootstrap, names, log_path)
                restarts += 1
            time.sleep(0.5)
    finally:
        worker.kill()
        worker.wait(10)
        if killed is not None:
            cluster.start(killed)
    took = time.monotonic() - started
    out: list[str] = []
    for partition in range(PARTITIONS):
        got = [v for _, v in read_all(cluster.bootstrap, names["output"], partition)]
        expected = [f"r{i}|out" for i in range(partition, records, PARTITIONS)]
        assert got == expected, f"partition {partition}: not exactly once, in order"
        out += got
    assert not [v for v, n in Counter(out).items() if n > 1]
    log = log_path.read_text()
    aborted = log.count("aborted transaction")
    assert aborted > 0, log[-2000:]
    everything = sum(len(read_all(cluster.bootstrap, names["output"], q, "read_uncommitted"))
                     for q in range(PARTITIONS))
    print(f"\ngroup coordinator {group_node}, transaction coordinator {txn_node}"
          f"{', killed the ' + kill + ' coordinator' if kill else ''}: {records} records "
          f"in {took:.1f}s, {aborted} transactions aborted, {restarts} worker restarts, "
          f"{everything - records} aborted records hidden")


@pytest.mark.parametrize("placement", ["apart", "together"])
def test_consume_transform_produce_on_three_brokers_is_exactly_once(
        eos_cluster: Cluster, tmp_path: Path, placement: str) -> None:
    run_loop(eos_cluster, tmp_path, placement == "together", records=600)


def test_exactly_once_when_the_transaction_coordinator_is_killed(
        eos_cluster: Cluster, tmp_path: Path) -> None:
    run_loop(eos_cluster, tmp_path, together=False, records=600, kill="transaction")


@pytest.mark.slow
@pytest.mark.parametrize("kill", ["group", "transaction"])
def test_exactly_once_through_a_coordinator_kill(
        eos_cluster: Cluster, tmp_path: Path, kill: str) -> None:
    run_loop(eos_cluster, tmp_path, together=False, records=3000, kill=kill,
             deadline_s=240)
