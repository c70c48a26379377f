"""Admin API calls the pages make: topics, configs, offsets, and the mutating actions.

Every function blocks (confluent-kafka futures); the web layer runs them in a worker
thread. Errors come out as `ConsoleError` with one line a page can show.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from odradek.console.settings import ConsoleSettings, shown


class ConsoleError(Exception):
    """What went wrong, in one line a page shows."""


def error_text(e: BaseException) -> str:
    err = e.args[0] if e.args else e
    method = getattr(err, "str", None)
    return str(method()) if callable(method) else str(err)


@dataclass(frozen=True)
class ConfigRow:
    name: str
    value: str  # already masked when sensitive
    source: str
    overridden: bool  # set on the topic or broker itself, not inherited


@dataclass(frozen=True)
class PartitionRow:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    log_start: int | None
    log_end: int | None
    size: int | None


@dataclass(frozen=True)
class TopicRow:
    name: str
    partitions: int
    replication: int
    under_replicated: int
    offline: int
    size: int | None
    internal: bool


_OVERRIDES = {ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DYNAMIC_BROKER_CONFIG,
              ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, ConfigSource.STATIC_BROKER_CONFIG}


class Admin:
    """One AdminClient for the console's life (librdkafka keeps its connections)."""

    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self.client = AdminClient(settings.kafka_config())
        self.timeout = settings.timeout_s

    def _wait(self, future: Any, what: str) -> Any:
        try:
            return future.result()
        except KafkaException as e:
            raise ConsoleError(f"{what}: {error_text(e)}") from None

    def metadata(self) -> Any:
        try:
            return self.client.list_topics(timeout=self.timeout)
        except KafkaException as e:
            raise ConsoleError(f"cannot reach the cluster at {self.settings.bootstrap}: "
                               f"{error_text(e)}") from None

    # ---- reading -----------------------------------------------------------------

    def configs(self, kind: str, name: str) -> list[ConfigRow]:
        """A topic's or broker's configs, overrides first; secrets masked."""
        rtype = ConfigResource.Type.TOPIC if kind == "topic" else ConfigResource.Type.BROKER
        resource = ConfigResource(rtype, name)
        futures = self.client.describe_configs([resource], request_timeout=self.timeout)
        entries: dict[str, ConfigEntry] = self._wait(futures[resource],
                                                     f"describing {kind} {name}")
        rows = [ConfigRow(e.name, shown(e.name, e.value, e.is_sensitive),
                          ConfigSource(e.source).name, ConfigSource(e.source) in _OVERRIDES)
                for e in entries.values()]
        return sorted(rows, key=lambda r: (not r.overridden, r.name))

    def offsets(self, tps: Iterable[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        """(log start, log end) of each partition; partitions that fail are left out."""
        wanted = list(tps)
        if not wanted:
            return {}
        out: dict[tuple[str, int], list[int]] = {tp: [-1, -1] for tp in wanted}
        for i, spec in enumerate((OffsetSpec.earliest(),  # type: ignore[no-untyped-call]
                                  OffsetSpec.latest())):  # type: ignore[no-untyped-call]
            futures = self.client.list_offsets({TopicPartition(t, p): spec for t, p in wanted},
                                               request_timeout=self.timeout)
            for tp, future in futures.items():
                try:
                    out[(tp.topic, tp.partition)][i] = int(future.result().offset)
                except KafkaException:
                    continue  # offline or just deleted: shown as unknown
        return {tp: (v[0], v[1]) for tp, v in out.items() if v[0] >= 0 and v[1] >= 0}

    # ---- mutating (POST only) ----------------------------------------------------

    def create_topic(self, name: str, partitions: int, replication: int,
                     configs: dict[str, str]) -> None:
        topic = NewTopic(name, num_partitions=partitions, replication_factor=replication,
                         config=configs)
        futures = self.client.create_topics([topic], request_timeout=self.timeout)
        self._wait(futures[name], f"creating topic {name}")

    def add_partitions(self, name: str, total: int) -> None:
        futures = self.client.create_partitions([NewPartitions(name, total)],
                                                request_timeout=self.timeout)
        self._wait(futures[name], f"adding partitions to {name}")

    def set_config(self, name: str, key: str, value: str | None) -> None:
        """Set (or with None, delete) one topic config, leaving the others alone."""
        op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
        resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
            ConfigEntry(key, value, incremental_operation=op)])
        futures = self.client.incremental_alter_configs([resource],
                                                        request_timeout=self.timeout)
        self._wait(futures[resource], f"setting {key} on {name}")

    def delete_topic(self, name: str) -> None:
        futures = self.client.delete_topics([name], request_timeout=self.timeout)
        self._wait(futures[name], f"deleting topic {name}")


def topic_rows(partitions: Iterable[Any], sizes: dict[tuple[str, int], int]) -> list[TopicRow]:
    """One row per topic from the sampler's partitions (health.PartitionView)."""
    by_topic: dict[str, list[Any]] = {}
    for p in partitions:
        by_topic.setdefault(p.topic, []).append(p)
    rows = []
    for name, parts in sorted(by_topic.items()):
        known = [sizes[(name, p.partition)] for p in parts if (name, p.partition) in sizes]
        rows.append(TopicRow(
            name=name, partitions=len(parts),
            replication=max((len(p.replicas) for p in parts), default=0),
            under_replicated=sum(1 for p in parts if p.leader >= 0
                                 and len(p.isr) < len(p.replicas)),
            offline=sum(1 for p in parts if p.leader < 0),
            size=sum(known) if known else None, internal=name.startswith("__")))
    return rows


def partition_rows(metadata: Any, topic: str, sizes: dict[tuple[str, int], int],
                   offsets: dict[tuple[str, int], tuple[int, int]]) -> list[PartitionRow]:
    t = metadata.topics.get(topic)
    if t is None or t.error is not None:
        raise ConsoleError(f"topic {topic} does not exist (deleted?)")
    rows = []
    for p in sorted(t.partitions.values(), key=lambda p: p.id):
        start, end = offsets.get((topic, p.id), (None, None))
        rows.append(PartitionRow(p.id, p.leader, tuple(p.replicas), tuple(p.isrs), start, end,
                                 sizes.get((topic, p.id))))
    return rows
