"""Broker configuration: Kafka's names, sources and their order, safe defaults, warnings."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.configdef import ConfigError
from odradek.server.config import BrokerConfig, default_data_dir, read_properties
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
