"""Replication quotas (KIP-73): the sampled rate, the throttled-replica lists, and the
configs as a client sets them on a real broker (Kafka's validation and messages)."""

from __future__ import annotations

import re

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from odradek.configdef import ConfigError
from odradek.replication.throttle import UNLIMITED, ReplicationQuota, is_throttled
from odradek.server.config import BrokerConfig
from odradek.storage.log_config import TOPIC_CONFIGS, LogConfig
from tests.conftest import BrokerProcess


def test_a_fresh_quota_divides_by_the_whole_window_as_kafka_rate_does() -> None:
    q = ReplicationQuota(lambda: 400, num_samples=11, window_s=1.0)
    q.record(5_000, now=0.0)
    # (samples - 1) windows at least: a fresh quota is not tripped by one burst
    assert q.rate(now=0.0) == pytest.approx(500.0)
    assert q.exceeded(now=0.0)
    q2 = ReplicationQuota(lambda: 600, num_samples=11, window_s=1.0)
    q2.record(5_000, now=0.0)
    assert not q2.exceeded(now=0.0)


def test_old_samples_fall_out_of_the_window() -> None:
    q = ReplicationQuota(lambda: 100, num_samples=2, window_s=1.0)
    q.record(1_000, now=0.0)
    assert q.rate(now=0.0) == pytest.approx(1_000.0)
    assert q.rate(now=1.5) == pytest.approx(1_000 / 1.5)
    assert q.rate(now=2.0) == 0.0  # the sample is older than 2 windows
    assert not q.exceeded(now=2.0)


@pytest.mark.parametrize("samples", [1, 2, 11])
def test_a_fetch_loop_held_by_the_quota_moves_about_the_rate(samples: int) -> None:
    # a fetcher asking every 10 ms for 64 KB while the quota allows 1 MB/s: over 30 s
    # it moves ~30 MB, plus at most the first (samples - 1) windows' burst
    rate = 1 << 20
    q = ReplicationQuota(lambda: rate, num_samples=samples, window_s=1.0)
    moved, t = 0, 0.0
    while t < 30.0:
        if not q.exceeded(now=t):
            q.record(65_536, now=t)
            moved += 65_536
        t += 0.01
    burst = (samples - 1) * rate + 65_536
    assert 30 * rate * 0.9 <= moved <= 30 * rate + burst + 2 * 65_536


def test_an_unlimited_quota_is_never_exceeded() -> None:
    q = ReplicationQuota(num_samples=1, window_s=1.0)
    q.record(10**12, now=0.0)
    assert q.bound == UNLIMITED
    assert not q.exceeded(now=0.0)


def test_the_rate_bound_is_read_at_each_check() -> None:
    bound = [UNLIMITED]
    q = ReplicationQuota(lambda: bound[0], num_samples=2, window_s=1.0)
    q.record(10_000, now=0.0)
    assert not q.exceeded(now=0.5)
    bound[0] = 1_000  # a dynamic config change, applied at once
    assert q.exceeded(now=0.5)


def test_throttled_replicas_name_partition_and_broker() -> None:
    entries = ["0:1", "0:2", "1:3"]
    assert is_throttled(entries, 0, 1)
    assert is_throttled(entries, 0, 2)
    assert not is_throttled(entries, 0, 3)
    assert is_throttled(entries, 1, 3)
    assert not is_throttled(entries, 2, 1)
    assert is_throttled(["*"], 7, 9)
    assert not is_throttled([], 0, 1)


@pytest.mark.parametrize("name", ["leader.replication.throttled.replicas",
                                  "follower.replication.throttled.replicas"])
def test_throttled_replica_lists_are_validated_as_kafka_does(name: str) -> None:
    d = TOPIC_CONFIGS[name]
    assert d.parse("0:1, 1:2") == ["0:1", "1:2"]
    assert d.parse("*") == ["*"]
    assert d.parse("") == []
    for bad in ("0-1", "a:1", "0:1,2", "1:*"):
        with pytest.raises(ConfigError, match="Must be the literal '\\*' or a list of "
                                               "replicas in the following format"):
            d.parse(bad)
    resolved = LogConfig.resolve({name: d.parse("0:1")})
    assert getattr(resolved, name.replace(".", "_")) == ("0:1",)


def test_the_rates_are_broker_properties_and_a_negative_one_is_refused() -> None:
    config = BrokerConfig.load(overrides={"follower.replication.throttled.rate": "1048576",
                                          "leader.replication.throttled.rate": "0"})
    assert config["follower.replication.throttled.rate"] == 1_048_576
    assert config["leader.replication.throttled.rate"] == 0
    assert BrokerConfig.load()["leader.replication.throttled.rate"] == UNLIMITED
    with pytest.raises(ConfigError, match=re.escape(
            "Invalid value -1 for configuration follower.replication.throttled.rate: "
            "Value must be at least 0")):
        BrokerConfig.load(overrides={"follower.replication.throttled.rate": "-1"})
    with pytest.raises(ConfigError, match=re.escape(
            "replica.alter.log.dirs.io.max.bytes.per.second is not supported yet")):
        BrokerConfig.load(overrides={
            "replica.alter.log.dirs.io.max.bytes.per.second": "1000"})


def _alter(admin: AdminClient, kind: ResourceType, name: str, key: str, value: str) -> None:
    res = ConfigResource(kind, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(15)


def test_a_client_sets_the_throttles_and_bad_values_get_invalid_config(
        broker: BrokerProcess, topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(15)
    _alter(admin, ResourceType.TOPIC, topic_name, "leader.replication.throttled.replicas",
           "0:1,1:1")
    _alter(admin, ResourceType.BROKER, "1", "leader.replication.throttled.rate", "1048576")
    try:
        res = ConfigResource(ResourceType.TOPIC, topic_name)
        got = admin.describe_configs([res])[res].result(15)
        assert got["leader.replication.throttled.replicas"].value == "0:1,1:1"
        res = ConfigResource(ResourceType.BROKER, "1")
        got = admin.describe_configs([res])[res].result(15)
        assert got["leader.replication.throttled.rate"].value == "1048576"
        for kind, name, key, value, message in [
            (ResourceType.BROKER, "1", "leader.replication.throttled.rate", "-5",
             "Value must be at least 0"),
            (ResourceType.TOPIC, topic_name, "follower.replication.throttled.replicas",
             "0:x", "Must be the literal '*'"),
        ]:
            with pytest.raises(KafkaException) as e:
                _alter(admin, kind, name, key, value)
            assert e.value.args[0].name() == "INVALID_CONFIG"
            assert message in e.value.args[0].str()
    finally:
        res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            ConfigEntry("leader.replication.throttled.rate", None,
                        incremental_operation=AlterConfigOpType.DELETE)])
        admin.incremental_alter_configs([res])[res].result(15)
