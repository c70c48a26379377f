"""`odradek topics`: create, list, describe, alter, delete — as kafka-topics.sh does."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import typer

from odradek.cli.common import (
    BootstrapOption,
    client_config,
    console,
    error_text,
    fail,
    parse_pairs,
    reported,
)

app = typer.Typer(no_args_is_help=True, help="Manage topics (kafka-topics.sh).")

TIMEOUT_S = 30


def admin(bootstrap: str, extra: list[str] | None = None) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(client_config(bootstrap, extra))


def _wait(futures: dict[Any, Any]) -> None:
    for name, future in futures.items():
        try:
            future.result(TIMEOUT_S)
        except Exception as e:  # confluent-kafka raises KafkaException per topic
            fail(f"{name}: {error_text(e)}")


@app.command()
def create(
    topic: str = typer.Argument(..., help="Topic name"),
    partitions: int = typer.Option(-1, "--partitions", "-p",
                                   help="Partitions (default: the broker's num.partitions)"),
    replication_factor: int = typer.Option(-1, "--replication-factor", "-r"),
    config: list[str] | None = typer.Option(None, "--config", "-c", help="key=value, repeatable"),
    if_not_exists: bool = typer.Option(False, "--if-not-exists"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Create a topic."""
    from confluent_kafka.admin import NewTopic

    with reported():
        client = admin(bootstrap)
        if if_not_exists and topic in client.list_topics(timeout=TIMEOUT_S).topics:
            return
        new = NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor,
                       config=parse_pairs(config))
        _wait(client.create_topics([new], request_timeout=TIMEOUT_S))
        console.print(f"Created topic {topic}.")


@app.command("list")
def list_topics(
    include_internal: bool = typer.Option(False, "--include-internal"),
    bootstrap: str = BootstrapOption,
) -> None:
    """List topic names."""
    with reported():
        md = admin(bootstrap).list_topics(timeout=TIMEOUT_S)
        for name in sorted(md.topics):
            if name.startswith("__") and not include_internal:
                continue
            print(name)


@app.command()
def describe(
    topics: list[str] | None = typer.Argument(None, help="Topics (default: all)"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Describe topics with the columns kafka-topics --describe prints."""
    with reported():
        client = admin(bootstrap)
        md = client.list_topics(timeout=TIMEOUT_S)
        names = topics or sorted(n for n in md.topics if not n.startswith("__"))
        for name in names:
            if name not in md.topics or md.topics[name].error is not None:
                fail(f"Topic '{name}' does not exist.")
        for line in describe_topics(client, names):
            print(line)


def kafka_uuid(value: Any) -> str:
    """A topic id as Kafka prints it: URL-safe base64 (librdkafka's str() uses + and /)."""
    return str(value).replace("+", "-").replace("/", "_")


def _ids(nodes: Any) -> str:
    return ",".join(str(n.id) for n in nodes)


def describe_topics(client: Any, names: list[str], reports: frozenset[str] | set[str] = frozenset(),
                    overrides_only: bool = False) -> Iterator[str]:
    """kafka-topics --describe's lines: a topic line (configs that are not defaults), then a
    line per partition. `reports` keeps only the partitions that are under-replicated,
    unavailable, under-min-isr or at-min-isr (and drops the topic lines), as Kafka does."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import ConfigResource

    if not names:
        return
    described = client.describe_topics(TopicCollection(names), request_timeout=TIMEOUT_S)
    live = {n.id for n in client.describe_cluster(request_timeout=TIMEOUT_S)
            .result(TIMEOUT_S).nodes}
    for name in names:
        desc = described[name].result(TIMEOUT_S)
        res = ConfigResource(ConfigResource.Type.TOPIC, name)
        entries = client.describe_configs([res])[res].result(TIMEOUT_S)
        non_default = [(k, v.value) for k, v in sorted(entries.items()) if not v.is_default]
        parts = sorted(desc.partitions, key=lambda p: p.id)
        if not reports and (not overrides_only or non_default):
            configs = ",".join(f"{k}={v}" for k, v in non_default)
            rf = len(parts[0].replicas) if parts else 0
            yield (f"Topic: {name}\tTopicId: {kafka_uuid(desc.topic_id)}\t"
                   f"PartitionCount: {len(parts)}\t"
                   f"ReplicationFactor: {rf}\tConfigs: {configs}")
        if overrides_only:
            continue
        min_isr_entry = entries.get("min.insync.replicas")
        min_isr = int(min_isr_entry.value) if min_isr_entry is not None else 1
        for p in parts:
            leader = p.leader.id if p.leader is not None and p.leader.id >= 0 else None
            flags = {
                "under-replicated": len(p.replicas) > len(p.isr),
                "unavailable": leader is None or leader not in live,
                "under-min-isr": leader is None or len(p.isr) < min_isr,
                "at-min-isr": len(p.isr) == min_isr,
            }
            if reports and not any(flags[r] for r in reports):
                continue
            yield (f"\tTopic: {name}\tPartition: {p.id}\t"
                   f"Leader: {'none' if leader is None else leader}\t"
                   f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}\t"
                   "Elr: N/A\tLastKnownElr: N/A")


@app.command()
def alter(
    topic: str = typer.Argument(...),
    partitions: int = typer.Option(..., "--partitions", "-p", help="New partition count"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Add partitions to a topic (never fewer)."""
    from confluent_kafka.admin import NewPartitions

    with reported():
        client = admin(bootstrap)  # keep it alive until the futures resolve
        _wait(client.create_partitions([NewPartitions(topic, partitions)],
                                       request_timeout=TIMEOUT_S))
        console.print(f"Topic {topic} now has {partitions} partitions.")


@app.command()
def delete(
    topics: list[str] = typer.Argument(...),
    bootstrap: str = BootstrapOption,
) -> None:
    """Delete topics."""
    with reported():
        client = admin(bootstrap)
        _wait(client.delete_topics(topics, request_timeout=TIMEOUT_S))
        for t in topics:
            console.print(f"Deleted topic {t}.")
