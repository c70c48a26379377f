"""The broker's `group.share.*` settings, by Kafka's names, as the share coordinator
and the share-partitions read them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

AUTO_OFFSET_RESET = "share.auto.offset.reset"
AUTO_OFFSET_RESET_CHOICES = ("latest", "earliest")
ISOLATION_LEVEL = "share.isolation.level"
ISOLATION_LEVEL_CHOICES = ("read_uncommitted", "read_committed")


@dataclass(frozen=True, slots=True)
class ShareConfig:
    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    partition_max_record_locks: int = 2000
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5000
    max_size: int = 200
    max_share_sessions: int = 2000
    offsets_partitions: int = 50

    @classmethod
    def from_broker(cls, values: Mapping[str, Any]) -> ShareConfig:
        return cls(
            record_lock_duration_ms=int(values["group.share.record.lock.duration.ms"]),
            delivery_count_limit=int(values["group.share.delivery.count.limit"]),
            partition_max_record_locks=int(values["group.share.partition.max.record.locks"]),
            session_timeout_ms=int(values["group.share.session.timeout.ms"]),
            heartbeat_interval_ms=int(values["group.share.heartbeat.interval.ms"]),
            max_size=int(values["group.share.max.size"]),
            max_share_sessions=int(values["group.share.max.share.sessions"]),
            offsets_partitions=int(values["offsets.topic.num.partitions"]),
        )
