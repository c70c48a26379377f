"""A consumer group's page: its description, lag per partition, and offset resets with a
preview of every partition's move (the same targets as `odradek groups reset-offsets`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import typer
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    TopicPartition,
)

from odradek.client.offsets import targets as reset_targets
from odradek.console.admin import Admin, ConsoleError, error_text

STRATEGIES = ("earliest", "latest", "offset", "datetime", "shift", "duration")


@dataclass(frozen=True)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: str


@dataclass(frozen=True)
class LagRow:
    topic: str
    partition: int
    committed: int | None
    log_end: int | None
    lag: int | None
    owner: str | None
    status: str


@dataclass
class GroupDetail:
    group: str
    state: str
    protocol: str  # classic or consumer (KIP-848)
    assignor: str
    coordinator: str
    members: list[Member]
    rows: list[LagRow]


def _describe(admin: Admin, group: str) -> Any:
    futures = admin.client.describe_consumer_groups([group], request_timeout=admin.timeout)
    try:
        return futures[group].result()
    except KafkaException as e:
        raise ConsoleError(f"group {group}: {error_text(e)}") from None


def committed(admin: Admin, group: str) -> dict[tuple[str, int], int | None]:
    futures = admin.client.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=admin.timeout)
    try:
        result = futures[group].result()
    except KafkaException as e:
        raise ConsoleError(f"group {group}: {error_text(e)}") from None
    return {(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else None
            for tp in result.topic_partitions}


def detail(admin: Admin, group: str, statuses: dict[tuple[str, int], str]) -> GroupDetail:
    d = _describe(admin, group)
    owners: dict[tuple[str, int], str] = {}
    members = []
    for m in d.members:
        tps = m.assignment.topic_partitions if m.assignment else []
        for tp in tps:
            owners[(tp.topic, tp.partition)] = m.client_id or m.member_id
        members.append(Member(m.member_id, m.group_instance_id, m.client_id, m.host,
                              ", ".join(f"{tp.topic}-{tp.partition}" for tp in tps) or "-"))
    offsets = committed(admin, group)
    keys = sorted(set(offsets) | set(owners))
    ends = admin.offsets(keys)
    rows = []
    for key in keys:
        current = offsets.get(key)
        end = ends[key][1] if key in ends else None
        lag = None if current is None or end is None else max(end - current, 0)
        rows.append(LagRow(key[0], key[1], current, end, lag, owners.get(key),
                           statuses.get(key, "ERR" if current is None else "…")))
    kind = getattr(d, "type", None)
    protocol = kind.name.lower() if kind is not None and kind.name != "UNKNOWN" else "classic"
    c = d.coordinator
    return GroupDetail(group, d.state.name.title(), protocol, d.partition_assignor or "-",
                       f"{c.id} ({c.host}:{c.port})" if c is not None else "-", members, rows)


@dataclass(frozen=True)
class ResetRequest:
    strategy: str
    value: str
    topic: str  # "" for every topic the group has offsets for

    @staticmethod
    def parse(form: dict[str, str]) -> ResetRequest:
        strategy = form.get("strategy", "")
        if strategy not in STRATEGIES:
            raise ConsoleError(f"choose how to reset: one of {', '.join(STRATEGIES)}")
        value = form.get("value", "").strip()
        if strategy in ("offset", "shift"):
            try:
                int(value)
            except ValueError:
                raise ConsoleError(f"{strategy} needs a whole number, got {value!r}") from None
        if strategy in ("datetime", "duration") and not value:
            raise ConsoleError(f"{strategy} needs a value (e.g. 2026-11-25T10:00:00 or PT10M)")
        return ResetRequest(strategy, value, form.get("topic", "").strip())


@dataclass(frozen=True)
class Move:
    topic: str
    partition: int
    current: int | None
    new: int

    @property
    def delta(self) -> int | None:
        return None if self.current is None else self.new - self.current


class _KnownWatermarks:
    """The consumer `odradek groups`' target logic asks, answering watermarks from the
    offsets already listed in one batch (not one request per partition)."""

    def __init__(self, consumer: Any, bounds: dict[tuple[str, int], tuple[int, int]]) -> None:
        self.consumer = consumer
        self.bounds = bounds

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float | None = None
                              ) -> tuple[int, int]:
        return self.bounds[(tp.topic, tp.partition)]

    def offsets_for_times(self, tps: list[TopicPartition], timeout: float | None = None
                          ) -> Any:
        return self.consumer.offsets_for_times(tps, timeout=timeout)


def preview(admin: Admin, group: str, req: ResetRequest, metadata: Any) -> list[Move]:
    """Every partition's move, bounded by its log start and end, as Kafka's tool does."""
    current = committed(admin, group)
    names = sorted({t for t, _ in current}) if not req.topic else [req.topic]
    if not names:
        raise ConsoleError(f"group {group} has no committed offsets: name a topic")
    tps = []
    for name in names:
        t = metadata.topics.get(name)
        if t is None or t.error is not None:
            raise ConsoleError(f"topic {name} does not exist")
        tps += [(name, p) for p in sorted(t.partitions)]
    bounds = admin.offsets(tps)  # every partition's log start and end in two requests
    missing = [f"{t}-{p}" for t, p in tps if (t, p) not in bounds]
    if missing:
        raise ConsoleError(f"no leader answers for {', '.join(missing[:5])}: try again later")
    probe = Consumer(admin.settings.kafka_config(**{"group.id": "odradek-console-probe"}))
    try:
        targets = reset_targets(_KnownWatermarks(probe, bounds), tps, current,
                           req.strategy == "earliest", req.strategy == "latest",
                           int(req.value) if req.strategy == "offset" else None,
                           req.value if req.strategy == "datetime" else None,
                           int(req.value) if req.strategy == "shift" else None,
                           req.value if req.strategy == "duration" else None)
        moves = []
        for (t, p), offset in sorted(targets.items()):
            low, high = bounds[(t, p)]
            moves.append(Move(t, p, current.get((t, p)), min(max(offset, low), high)))
    except ValueError as e:  # a malformed date or duration
        raise ConsoleError(f"{req.strategy} {req.value!r} is not valid: {e}") from None
    except typer.Exit:
        raise ConsoleError("could not work out the targets") from None
    except KafkaException as e:
        raise ConsoleError(error_text(e)) from None
    finally:
        probe.close()
    return moves


def apply(admin: Admin, group: str, moves: list[Move]) -> None:
    d = _describe(admin, group)
    if d.members:
        raise ConsoleError(f"offsets can only be reset while group {group} is inactive; it "
                           f"is {d.state.name.title()} with {len(d.members)} member(s) — "
                           "stop its consumers first")
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(m.topic, m.partition, m.new) for m in moves])
    futures = admin.client.alter_consumer_group_offsets([request],
                                                        request_timeout=admin.timeout)
    try:
        result = futures[group].result()
    except KafkaException as e:
        raise ConsoleError(f"resetting {group}: {error_text(e)}") from None
    for tp in result.topic_partitions:
        if tp.error is not None:
            raise ConsoleError(f"{tp.topic}-{tp.partition}: {error_text(tp.error)}")
