"""DescribeConfigs' sources and default flags as Kafka 4.1+ reports them.

A new Kafka 4.1 cluster has eligible leader replicas (KIP-966) on, and its controller
writes `min.insync.replicas` as a cluster-level config at activation: every topic then
lists it among its non-default configs (DYNAMIC_DEFAULT_BROKER_CONFIG), which is what
confluent-kafka-python's admin tests expect from a 4.1+ broker. A broker property
given at start-up is STATIC_BROKER_CONFIG, a topic override DYNAMIC_TOPIC_CONFIG, and
only what nobody set is DEFAULT_CONFIG.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from odradek.protocol.errors import ErrorCode
from tests.conftest import BrokerProcess
from tests.wire import WireClient


@pytest.fixture(scope="module")
def configured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("sources") / "data", overrides={
        "log.retention.ms": "3600000", "min.insync.replicas": "1"}).start()
    yield b
    b.stop()


def describe(admin: AdminClient, resource: ConfigResource) -> dict[str, ConfigEntry]:
    return dict(admin.describe_configs([resource])[resource].result(15))


def test_topic_configs_report_kafka_4_1_sources(configured: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": configured.bootstrap})
    admin.create_topics([NewTopic("sources", 2, 1, config={"compression.type": "gzip"})]
                        )["sources"].result(15)
    topic = ConfigResource(ResourceType.TOPIC, "sources", incremental_configs=[
        ConfigEntry("cleanup.policy", "compact",
                    incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("retention.ms", "10000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([topic])[topic].result(15)
    entries = describe(admin, ConfigResource(ResourceType.TOPIC, "sources"))
    # confluent-kafka-python's test_incremental_alter_configs on Kafka 4.1+
    assert sorted(str(e) for e in entries.values() if not e.is_default) == [
        'cleanup.policy="delete,compact"', 'compression.type="gzip"',
        'min.insync.replicas="1"', 'retention.ms="10000"']
    sources = {name: e.source for name, e in entries.items()}
    assert sources["min.insync.replicas"] == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert sources["retention.ms"] == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert sources["segment.bytes"] == ConfigSource.DEFAULT_CONFIG.value


def test_broker_configs_report_static_and_cluster_level_sources(
        configured: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": configured.bootstrap})
    entries = describe(admin, ConfigResource(ResourceType.BROKER, "1"))
    assert entries["log.retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert entries["log.retention.ms"].value == "3600000"
    assert not entries["log.retention.ms"].is_default
    assert entries["min.insync.replicas"].source == \
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert entries["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    assert entries["num.partitions"].is_default
    # the cluster-level value is a real dynamic config: it can be changed like any other
    with WireClient(configured.bootstrap) as w:  # librdkafka cannot name the cluster level
        s = w.schema(44, 1)
        r = w.call(44, 1, validate_only=False, resources=(s.AlterConfigsResource(
            resource_type=4, resource_name="", configs=(s.AlterableConfig(
                name="min.insync.replicas", config_operation=0, value="2"),)),))
    assert [x.error_code for x in r.responses] == [ErrorCode.none]
    assert describe(admin, ConfigResource(ResourceType.BROKER, "1"))[
        "min.insync.replicas"].value == "2"


def test_synonyms_are_listed_level_by_level_as_kafka_does(configured: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": configured.bootstrap})
    admin.create_topics([NewTopic("synonyms", 1, 1, config={"retention.ms": "10000"})]
                        )["synonyms"].result(15)
    with WireClient(configured.bootstrap) as w:
        s = w.schema(32, 4)
        r = w.call(32, 4, include_synonyms=True, include_documentation=False, resources=(
            s.DescribeConfigsResource(resource_type=2, resource_name="synonyms",
                                      configuration_keys=("retention.ms", "segment.bytes")),))
    (result,) = r.results
    got = {c.name: [(x.name, x.value, x.source) for x in c.synonyms] for c in result.configs}
    # the topic's override, the broker's static property, then the built-in default
    assert got["retention.ms"][0] == ("retention.ms", "10000", 1)
    assert ("log.retention.ms", "3600000", 4) in got["retention.ms"]
    assert got["retention.ms"][-1][2] == 5
    assert [x[2] for x in got["segment.bytes"]] == [5]
