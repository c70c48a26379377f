"""Where `advise check` reads a user's settings: client .properties files, a
server.properties, and a running cluster's topics and brokers (DescribeConfigs through
confluent-kafka's AdminClient)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from odradek.advice.check import Settings
from odradek.advice.rules import Scope

TIMEOUT_S = 30


def _read_properties(path: Path) -> dict[str, str]:
    from odradek.configdef import read_properties

    return {k: v.strip() for k, v in read_properties(path).items()}


# librdkafka's (confluent-kafka's) own names for the same settings.
LIBRDKAFKA_ALIASES = {
    "queue.buffering.max.ms": "linger.ms",
    "request.required.acks": "acks",
    "compression.codec": "compression.type",
    "fetch.wait.max.ms": "fetch.max.wait.ms",
    "message.send.max.retries": "retries",
}


def client_file(path: Path, scope: Scope) -> Settings:
    """A producer's or consumer's .properties, under Kafka's names (librdkafka's aliases
    translated); what it leaves out has Kafka's default."""
    values = {LIBRDKAFKA_ALIASES.get(k, k): v for k, v in _read_properties(path).items()}
    return Settings.of(scope, f"{scope.value} ({path.name})", values)


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def broker_file(path: Path) -> Settings:
    """A server.properties for `odradek broker`: what it leaves out has odradek's default
    where odradek defines the property (ours are safer than Kafka's), else Kafka's."""
    from odradek.broker_properties import BROKER_CONFIGS

    defaults = {}
    for d in BROKER_CONFIGS:
        text = _as_text(d.default)
        if text is not None:
            defaults[d.name] = (text, "odradek's default")
    return Settings.of(Scope.BROKER, f"broker ({path.name})", _read_properties(path), defaults)


def live(client_config: dict[str, Any], topics: Sequence[str]) -> list[Settings]:
    """Every broker's configs, and each topic's with its replication factor (from the
    metadata: it is no config), as the cluster reports them now."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    client = AdminClient(client_config)
    metadata = client.list_topics(timeout=TIMEOUT_S)
    for topic in topics:
        if topic not in metadata.topics or metadata.topics[topic].error is not None:
            raise ValueError(f"topic {topic} does not exist")
    resources = [ConfigResource(ConfigResource.Type.BROKER, str(b))
                 for b in sorted(metadata.brokers)]
    resources += [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
    futures = client.describe_configs(resources, request_timeout=TIMEOUT_S)
    out = []
    for res in resources:
        entries = futures[res].result(TIMEOUT_S)
        values = {name: e.value for name, e in entries.items() if e.value is not None}
        if res.restype == ConfigResource.Type.BROKER:
            out.append(Settings.of(Scope.BROKER, f"broker {res.name}", values))
            continue
        partitions = metadata.topics[res.name].partitions.values()
        values["replication.factor"] = str(min((len(p.replicas) for p in partitions),
                                               default=0))
        out.append(Settings.of(Scope.TOPIC, f"topic {res.name}", values))
    return out
