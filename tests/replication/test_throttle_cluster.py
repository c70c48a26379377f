"""Replication throttles on a real three-broker ZooKeeper cluster: a reassignment whose
new replica is throttled catches up no faster than the rate, while an unthrottled
partition moved at the same moment is copied at full speed."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from typer.testing import CliRunner

from odradek.cli.main import app
from tests.cluster.harness import Cluster, client_config, quiet_stderr

pytestmark = pytest.mark.timeout(180)

RATE = 1 << 20  # bytes/s
SIZE = 5 << 20  # bytes in each partition
# one sample (Kafka's minimum): no first-windows burst, so the time is about SIZE/RATE;
# batches of 64 KB, so that one fetch past the quota is a small part of a second's worth
CONFIGS = {"replication.quota.window.num": "1"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("throttle"), size=3, configs=CONFIGS) as c, \
            quiet_stderr():
        yield c


def odradek(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def filled_topic(cluster: Cluster, prefix: str) -> str:
    """A one-partition topic on broker 1 only, holding SIZE bytes of incompressible
    records."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    admin = cluster.admin()  # held until the answer: a dropped client cancels it
    admin.create_topics([NewTopic(name, 1, replica_assignment=[[1]])])[name].result(15)
    cluster.wait_for(lambda: cluster.partitions(name)[0][0] == 1, 15, "a leader")
    producer = Producer(client_config(cluster.bootstrap, **{"linger.ms": 5, "batch.size": 65536}))
    record = 4096
    for _ in range(SIZE // record):
        while True:
            try:
                producer.produce(name, os.urandom(record))
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(30) == 0
    return name


def set_configs(cluster: Cluster, kind: ResourceType, name: str, **configs: str) -> None:
    res = ConfigResource(kind, name, incremental_configs=[
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    admin = cluster.admin()
    admin.incremental_alter_configs([res])[res].result(15)


def moves_file(tmp_path: Path, topics: list[str]) -> Path:
    path = tmp_path / f"moves-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": 0, "replicas": [1, 2]} for t in topics]}))
    return path


def caught_up_times(cluster: Cluster, topics: list[str], start: float) -> dict[str, float]:
    """Seconds from `start` until broker 2 joins each topic's ISR."""
    done: dict[str, float] = {}

    def all_in() -> bool:
        for t in topics:
            if t not in done and 2 in cluster.partitions(t)[0][2]:
                done[t] = time.monotonic() - start
        return len(done) == len(topics)

    try:
        cluster.wait_for(all_in, 60, "broker 2 in every ISR", interval=0.05)
    except AssertionError as e:
        raise AssertionError(f"{e}; caught up: {done}") from None
    return done


@pytest.mark.parametrize("side,broker", [("follower", 2), ("leader", 1)])
def test_a_throttle_holds_the_new_replica_to_the_rate_and_no_other(
        cluster: Cluster, tmp_path: Path, side: str, broker: int) -> None:
    # the follower side: broker 2 leaves the partition out of its fetches; the leader
    # side: broker 1 leaves it out of its answers
    throttled, free = filled_topic(cluster, "slow"), filled_topic(cluster, "free")
    set_configs(cluster, ResourceType.TOPIC, throttled,
                **{f"{side}_replication_throttled_replicas": f"0:{broker}"})
    rate_name = f"{side}.replication.throttled.rate"
    set_configs(cluster, ResourceType.BROKER, str(broker), **{rate_name: str(RATE)})
    try:
        path = moves_file(tmp_path, [throttled, free])
        start = time.monotonic()
        odradek("reassign", "-b", cluster.bootstrap, "--execute", "--reassignment-json-file",
                str(path))
        took = caught_up_times(cluster, [throttled, free], start)
    finally:
        res = ConfigResource(ResourceType.BROKER, str(broker), incremental_configs=[
            ConfigEntry(rate_name, None, incremental_operation=AlterConfigOpType.DELETE)])
        admin = cluster.admin()
        admin.incremental_alter_configs([res])[res].result(15)
    floor = SIZE / RATE * 0.8
    assert took[throttled] >= floor, took
    # the unthrottled partition was copied at full speed meanwhile
    # (a partition held to the rate takes at least `floor`; a loaded machine slows both)
    assert took[free] < floor, took


def test_reassign_throttle_sets_the_rates_and_replicas_and_verify_removes_them(
        cluster: Cluster, tmp_path: Path) -> None:
    throttled = filled_topic(cluster, "cli")
    path = moves_file(tmp_path, [throttled])
    start = time.monotonic()
    out = odradek("reassign", "-b", cluster.bootstrap, "--execute", "--reassignment-json-file",
                  str(path), "--throttle", str(RATE))
    assert f"The inter-broker throttle limit was set to {RATE} B/s" in out
    described = describe(cluster, ResourceType.TOPIC, throttled)
    assert described["leader.replication.throttled.replicas"] == "0:1"
    assert described["follower.replication.throttled.replicas"] == "0:2"
    assert describe(cluster, ResourceType.BROKER, "2")[
        "follower.replication.throttled.rate"] == str(RATE)
    took = caught_up_times(cluster, [throttled], start)[throttled]
    assert took >= SIZE / RATE * 0.8
    cluster.wait_for(lambda: "is completed" in odradek(
        "reassign", "-b", cluster.bootstrap, "--verify", "--reassignment-json-file",
        str(path)), 30, "the reassignment to complete")
    out = odradek("reassign", "-b", cluster.bootstrap, "--verify",
                  "--reassignment-json-file", str(path))
    assert "Clearing broker-level throttles" in out
    assert f"Clearing topic-level throttles on topic {throttled}" in out
    described = describe(cluster, ResourceType.TOPIC, throttled)
    assert described["leader.replication.throttled.replicas"] == ""
    assert describe(cluster, ResourceType.BROKER, "2")[
        "follower.replication.throttled.rate"] == str(2**63 - 1)


def describe(cluster: Cluster, kind: ResourceType, name: str) -> dict[str, str]:
    res = ConfigResource(kind, name)
    admin = cluster.admin()
    got = admin.describe_configs([res])[res].result(15)
    return {k: v.value for k, v in got.items()}
