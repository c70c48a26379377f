"""Client telemetry (KIP-714): a `client.metrics` subscription made with kafka-python's
admin, a confluent-kafka producer (librdkafka >= 2.5 pushes by itself) whose metrics
appear on the broker's Prometheus endpoint, and the wire-level refusals."""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from odradek.protocol.errors import ErrorCode
from tests.clients.test_confluent_kafka import create_topic
from tests.conftest import BrokerProcess, free_port
from tests.wire import WireClient


def _subscribe(admin: KafkaAdminClient, name: str, **configs: str) -> str:
    """'OK', or kafka-python's rendering of the broker's error."""
    resource = ConfigResource(ConfigResourceType.CLIENT_METRICS, name, configs=configs)
    result = admin.alter_configs([resource], raise_on_unknown=False, incremental=True)
    return str(result["client_metrics"][name])


def _described(admin: KafkaAdminClient, name: str) -> dict[str, str]:
    described = admin.describe_configs(
        [ConfigResource(ConfigResourceType.CLIENT_METRICS, name)], config_filter="all")
    [by_name] = described.values()
    return {key: entry["value"] for key, entry in by_name[name].items()}


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield a
    a.close()


def test_a_subscription_is_a_client_metrics_config_resource(admin: KafkaAdminClient) -> None:
    name = f"sub-{uuid.uuid4().hex[:6]}"
    assert _subscribe(admin, name, **{"metrics": "org.apache.kafka.producer.",
                                      "interval.ms": "2000", "match": "client_id=app-.*"}) == "OK"
    assert _described(admin, name) == {"metrics": "org.apache.kafka.producer.",
                                       "interval.ms": "2000", "match": "client_id=app-.*"}
    assert _subscribe(admin, name, **{"interval.ms": "50"}) == (
        "[Error 40] InvalidConfigurationError: Invalid value 50 for interval.ms, interval "
        "must be between 100 and 3600000")
    assert "Illegal client matching pattern: nosuchkey=x" in _subscribe(
        admin, name, **{"match": "nosuchkey=x"})
    assert "InvalidRequestError: Unknown client metric configuration: bogus" in _subscribe(
        admin, name, **{"bogus": "1"})
    assert _described(admin, name)["interval.ms"] == "2000"  # refusals changed nothing


def test_a_producers_own_metrics_reach_the_prometheus_endpoint(
        fresh_broker: BrokerProcess, topic_name: str) -> None:
    port = free_port()
    fresh_broker.overrides = {"metrics.port": str(port)}
    fresh_broker.start()
    create_topic(fresh_broker.bootstrap, topic_name)
    admin = KafkaAdminClient(bootstrap_servers=fresh_broker.bootstrap)
    try:
        _subscribe(admin, "all-producers", **{
            "metrics": "*", "interval.ms": "500",
            "match": "client_id=telemetry-.*,client_software_name=confluent-kafka-python"})
    finally:
        admin.close()
    producer = Producer({"bootstrap.servers": fresh_broker.bootstrap,
                         "client.id": "telemetry-test"})
    try:
        deadline = time.monotonic() + 30
        lines: list[str] = []
        while time.monotonic() < deadline and not lines:
            producer.produce(topic_name, value=b"x")
            producer.poll(0.5)
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                          timeout=5).read().decode()
            lines = [line for line in text.splitlines()
                     if line.startswith("org_apache_kafka_producer_")
                     and "client_instance_id=" in line]
        assert lines, "no producer metric arrived in 30 s"
        assert all('client_id="telemetry-test"' in line for line in lines)
        latency = [line for line in lines
                   if line.startswith("org_apache_kafka_producer_node_request_latency_max{")]
        assert latency and 'node_id="1"' in latency[0] and float(latency[0].split()[-1]) > 0
    finally:
        producer.flush(10)
    fresh_broker.restart()  # subscriptions are metadata: they outlive the broker process
    admin = KafkaAdminClient(bootstrap_servers=fresh_broker.bootstrap)
    try:
        assert _described(admin, "all-producers")["interval.ms"] == "500"
    finally:
        admin.close()


def test_pushes_are_refused_with_kafkas_codes(broker: BrokerProcess) -> None:
    with WireClient(broker.bootstrap) as w:
        sub = w.call(71, 0, client_instance_id=None)
        assert sub.error_code == ErrorCode.none
        assert sub.client_instance_id not in (None, uuid.UUID(int=0))
        assert sub.requested_metrics == () or isinstance(sub.requested_metrics, tuple)

        def push(**fields: object) -> ErrorCode:
            body = {"client_instance_id": sub.client_instance_id,
                    "subscription_id": sub.subscription_id, "terminating": False,
                    "compression_type": 0, "metrics": b"", **fields}
            return w.call(72, 0, **body).error_code

        assert push(subscription_id=sub.subscription_id + 1) == ErrorCode.unknown_subscription_id
        assert push(client_instance_id=uuid.uuid4()) == ErrorCode.unknown_subscription_id
        assert push(client_instance_id=uuid.UUID(int=0)) == ErrorCode.invalid_request
        assert push(compression_type=9) == ErrorCode.unsupported_compression_type
        assert push(metrics=b"\x0a\xff") == ErrorCode.invalid_record
        assert push(metrics=b"x" * (1024 * 1024 + 1)) == ErrorCode.telemetry_too_large
        assert push() == ErrorCode.none
        assert push() == ErrorCode.throttling_quota_exceeded  # before half its interval
        assert push(terminating=True) == ErrorCode.none
        assert push() == ErrorCode.unknown_subscription_id  # gone once it said goodbye


def test_subscriptions_are_listed_as_config_resources(admin: KafkaAdminClient,
                                                      broker: BrokerProcess,
                                                      topic_name: str) -> None:
    name = f"listed-{uuid.uuid4().hex[:6]}"
    assert _subscribe(admin, name, metrics="*") == "OK"
    create_topic(broker.bootstrap, topic_name)
    listed = admin.list_config_resources([ConfigResourceType.CLIENT_METRICS])
    assert name in listed["client_metrics"] and "topic" not in listed
    every = admin.list_config_resources()
    assert topic_name in every["topic"] and every["broker"] == ["1"]
    with WireClient(broker.bootstrap) as w:
        v0 = w.call(74, 0)  # Kafka 3.7's ListClientMetricsResources
        assert name in [r.resource_name for r in v0.config_resources]
        bad = w.call(74, 1, resource_types=(99,))
        assert bad.error_code == ErrorCode.invalid_request


def test_match_selects_on_the_software_a_connection_named(admin: KafkaAdminClient,
                                                          broker: BrokerProcess) -> None:
    # other tests' subscriptions share this broker: this one is told apart by its
    # interval, the shortest of those matching a client
    assert _subscribe(admin, f"sw-{uuid.uuid4().hex[:6]}", metrics="org.sw.",
                      **{"interval.ms": "123",
                         "match": "client_software_name=wire-sw,"
                                  "client_software_version=2\\..*"}) == "OK"

    def interval_ms(name: str, version: str) -> float:
        with WireClient(broker.bootstrap) as w:
            w.call(18, 3, client_software_name=name, client_software_version=version)
            push = w.call(71, 0, client_instance_id=None).push_interval
            return float(push.total_seconds() * 1000)

    assert interval_ms("wire-sw", "2.1") == 123
    assert interval_ms("wire-sw", "3.0") != 123
    assert interval_ms("other", "2.1") != 123
