"""What every group shares: its config, its committed offsets, and the runtime's
services a group's state machine calls (time, timers, the log)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from odradek.coordinator.runtime.timer import CoordinatorTimer

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class GroupConfig:
    """The broker settings the coordinator reads, by Kafka's names."""

    offsets_partitions: int = 50
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2_147_483_647
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_session_timeout_ms: int = 45000
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    protocols: tuple[str, ...] = ("classic", "consumer")
    migration_policy: str = "bidirectional"  # group.consumer.migration.policy

    @property
    def upgrade_enabled(self) -> bool:
        return self.migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_enabled(self) -> bool:
        return self.migration_policy in ("bidirectional", "downgrade")

    @classmethod
    def from_broker(cls, values: Mapping[str, Any]) -> GroupConfig:
        return cls(
            offsets_partitions=int(values["offsets.topic.num.partitions"]),
            initial_rebalance_delay_ms=int(values["group.initial.rebalance.delay.ms"]),
            min_session_timeout_ms=int(values["group.min.session.timeout.ms"]),
            max_session_timeout_ms=int(values["group.max.session.timeout.ms"]),
            max_size=int(values["group.max.size"]),
            offset_metadata_max_bytes=int(values["offset.metadata.max.bytes"]),
            offsets_retention_ms=int(values["offsets.retention.minutes"]) * 60_000,
            offsets_retention_check_interval_ms=int(
                values["offsets.retention.check.interval.ms"]),
            consumer_heartbeat_interval_ms=int(values["group.consumer.heartbeat.interval.ms"]),
            consumer_session_timeout_ms=int(values["group.consumer.session.timeout.ms"]),
            consumer_assignors=tuple(values["group.consumer.assignors"]),
            protocols=tuple(values["group.coordinator.rebalance.protocols"]),
            migration_policy=str(values["group.consumer.migration.policy"]).lower(),
        )


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # set only by OffsetCommit v1 clients


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    """One partition of an OffsetCommit request."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


class Group:
    """A group of either protocol; the committed offsets live here."""

    kind = "classic"

    def __init__(self, group_id: str, partition: int) -> None:
        self.group_id = group_id
        self.partition = partition  # of __consumer_offsets
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        # offsets written inside transactions not yet ended, by producer id
        # (coordinator/group/txn_offsets.py)
        self.pending_txn_offsets: dict[int, dict[TopicPartition, OffsetAndMetadata]] = {}
        self.current_state_timestamp = now_ms()

    @property
    def state_name(self) -> str:
        raise NotImplementedError

    def is_empty(self) -> bool:
        raise NotImplementedError

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to; None when the group's protocol is opaque."""
        raise NotImplementedError


class Runtime(Protocol):
    """What a group's state machine calls: its partition's shard (group/shard.py)."""

    config: GroupConfig
    timer: CoordinatorTimer

    async def store_group(self, group: Group, record: tuple[bytes, bytes | None]) -> None: ...

    def spawn(self, coro: Any) -> None: ...


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Timer:
    """One timer slot of a group (a member's session, the join phase …): scheduling
    again replaces the previous one. The slot is its key in the partition's timers, so
    the runtime cancels it with the partition."""

    __slots__ = ("_timers",)

    def __init__(self) -> None:
        self._timers: CoordinatorTimer | None = None

    def set(self, runtime: Runtime, delay_ms: int, fn: Callable[[], None]) -> None:
        self._timers = runtime.timer
        self._timers.schedule(self, delay_ms, fn)

    def cancel(self) -> None:
        if self._timers is not None:
            self._timers.cancel(self)
            self._timers = None
