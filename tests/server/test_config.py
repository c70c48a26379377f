"""Broker configuration: Kafka's names, sources and their order, safe defaults, warnings."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.broker_properties import default_data_dir
from odradek.configdef import ConfigError
from odradek.server.config import BrokerConfig, read_properties
from odradek.storage.log_config import LogConfig


def test_properties_file_env_and_overrides_in_that_order(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(
        "# comment\n"
        "broker.id=7\n"
        "log.dirs=/data/a,/data/b\n"
        "num.partitions : 4\n"
        "log.retention.hours=24\n"
        "listeners=PLAINTEXT://0.0.0.0:9093\n"
        "advertised.listeners=PLAINTEXT://kafka-1.example:9093\n"
    )
    env = {"ODRADEK_NUM_PARTITIONS": "6", "ODRADEK_LOG_RETENTION_HOURS": "48"}
    config = BrokerConfig.load(props, {"log.retention.hours": "12"}, environ=env)
    assert config.node_id == 7
    assert config.log_dirs == [Path("/data/a"), Path("/data/b")]
    assert config["num.partitions"] == 6  # env beats the file
    assert config["log.retention.hours"] == 12  # --override beats env
    assert config.advertised_listeners[0].host == "kafka-1.example"
    assert LogConfig.resolve({}, config.values()).retention_ms == 12 * 3_600_000


def test_safe_defaults() -> None:
    config = BrokerConfig.load(environ={})
    assert config["auto.create.topics.enable"] is False
    assert config["delete.topic.enable"] is True
    assert config["log.retention.hours"] == 72
    assert config.log_dirs == [default_data_dir()]
    assert not str(default_data_dir()).startswith("/tmp")
    assert LogConfig.resolve({}, config.values()).retention_ms == 72 * 3_600_000


def test_retention_ms_beats_minutes_beats_hours() -> None:
    config = BrokerConfig.load(environ={}, overrides={"log.retention.minutes": "30"})
    assert LogConfig.resolve({}, config.values()).retention_ms == 30 * 60_000
    config = BrokerConfig.load(environ={}, overrides={"log.retention.minutes": "30",
                                                      "log.retention.ms": "1234"})
    assert LogConfig.resolve({}, config.values()).retention_ms == 1234
    assert LogConfig.resolve({"retention.ms": 99}, config.values()).retention_ms == 99


@pytest.mark.parametrize("name,value", [
    ("log.retention.hours", "soon"),
    ("num.partitions", "0"),
    ("listeners", "localhost:9092"),
    ("auto.create.topics.enable", "yes"),
])
def test_invalid_values_name_the_property(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name.replace(".", r"\.")):
        BrokerConfig.load(environ={}, overrides={name: value})


def test_risky_settings_warn_with_reasons() -> None:
    config = BrokerConfig.load(environ={}, overrides={
        "log.dirs": "/tmp/kafka-logs", "auto.create.topics.enable": "true",
        "unclean.leader.election.enable": "true", "log.flush.interval.messages": "1"})
    text = "\n".join(config.warnings())
    assert "wiped on reboot" in text
    assert "typo" in text
    assert "acknowledged writes can be lost" in text
    assert "fsync per message" in text


def test_java_properties_continuations(tmp_path: Path) -> None:
    f = tmp_path / "p.properties"
    f.write_text("a=1\\\n  ,2\n! bang comment\nb: x y\n")
    assert read_properties(f) == {"a": "1,2", "b": "x y"}


@pytest.mark.parametrize(("listener", "missing"), [
    ("SASL_SSL://127.0.0.1:9093", "ssl.keystore.location"),
    ("SSL://127.0.0.1:9093", "ssl.keystore.location"),
    ("SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms"),
])
def test_a_secured_listener_without_what_it_needs_stops_the_start(listener: str,
                                                                   missing: str) -> None:
    with pytest.raises(ConfigError, match=missing.replace(".", r"\.")):
        BrokerConfig.load(environ={}, overrides={"listeners": listener})


def test_a_custom_listener_name_takes_its_protocol_from_the_map() -> None:
    config = BrokerConfig.load(environ={}, overrides={
        "listeners": "INTERNAL://127.0.0.1:9092",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT"})
    assert config.security_protocol("INTERNAL") == "PLAINTEXT"
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location"):
        BrokerConfig.load(environ={}, overrides={
            "listeners": "INTERNAL://127.0.0.1:9092",
            "listener.security.protocol.map": "INTERNAL:SASL_SSL"})
    with pytest.raises(ConfigError, match="No security protocol defined for listener INTERNAL"):
        BrokerConfig.load(environ={}, overrides={"listeners": "INTERNAL://127.0.0.1:9092"})


def test_sasl_and_tls_properties_are_kept_for_the_listeners() -> None:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="a" password="b" user_a="b";')
    config = BrokerConfig.load(environ={}, overrides={
        "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas})
    assert config.security_props["sasl.enabled.mechanisms"] == "PLAIN"


@pytest.mark.parametrize("name,value", [
    ("client.quota.callback.class", "com.example.Quotas"),
    ("quota.producer.default", "1024"),  # gone from Kafka since 3.0: a <default> entity
    ("producer.byte.rate", "1024"),
    ("control.plane.listener.name", "CONTROLLER"),
])
def test_a_security_property_not_honoured_stops_the_start(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name.replace(".", r"\.") + " is not supported"):
        BrokerConfig.load(environ={}, overrides={name: value})


def test_connection_limits_are_checked_at_start() -> None:
    with pytest.raises(ConfigError, match="can be set to zero only if"):
        BrokerConfig.load(environ={}, overrides={"max.connections.per.ip": "0"})
    with pytest.raises(ConfigError, match="expected host:count"):
        BrokerConfig.load(environ={}, overrides={"max.connections.per.ip.overrides": "x"})
    with pytest.raises(ConfigError, match=r"listener\.name\.plaintext\.max\.connections"):
        BrokerConfig.load(environ={}, overrides={
            "listener.name.plaintext.max.connections": "many"})
    config = BrokerConfig.load(environ={}, overrides={
        "max.connections": "100", "max.connections.per.ip": "0",
        "max.connections.per.ip.overrides": "127.0.0.1:5,localhost:7",
        "listener.name.plaintext.max.connection.creation.rate": "20"})
    assert config["max.connections"] == 100


def test_an_authorizer_is_one_of_kafkas_on_either_store() -> None:
    with pytest.raises(ConfigError, match=r"authorizer\.class\.name: com\.example\.Mine"):
        BrokerConfig.load(environ={}, overrides={"authorizer.class.name": "com.example.Mine"})
    on_zookeeper = BrokerConfig.load(environ={}, overrides={  # ACLs in /kafka-acl
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "zookeeper.connect": "127.0.0.1:2181"})
    assert on_zookeeper.security_props["authorizer.class.name"].endswith("AclAuthorizer")
    with pytest.raises(ConfigError, match=r"super\.users"):
        BrokerConfig.load(environ={}, overrides={
            "authorizer.class.name": "acl", "super.users": "admin-without-type"})


@pytest.mark.parametrize("overrides,message", [
    ({"replica.selector.class": "com.example.MySelector"},
     r"replica\.selector\.class: com\.example\.MySelector is not one"),
    ({"replica.fetch.wait.max.ms": "40000"}, r"replica\.socket\.timeout\.ms should"),
    ({"replica.fetch.wait.max.ms": "2000", "replica.lag.time.max.ms": "1000"},
     r"replica\.fetch\.wait\.max\.ms should always be less"),
    ({"replica.socket.receive.buffer.bytes": "-2"}, r"replica\.socket\.receive\.buffer"),
    ({"leader.replication.throttled.rate": "-1"},
     r"leader\.replication\.throttled\.rate: Value must be at least 0"),
    ({"replica.alter.log.dirs.io.max.bytes.per.second": "1000000"},
     r"replica\.alter\.log\.dirs\.io\.max\.bytes\.per\.second is not supported yet"),
])
def test_replica_settings_kafka_refuses_stop_the_start(overrides: dict[str, str],
                                                         message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.load(environ={}, overrides=overrides)


def test_the_rack_aware_selector_is_accepted() -> None:
    name = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
    config = BrokerConfig.load(environ={}, overrides={"replica.selector.class": name})
    assert config["replica.selector.class"] == name
