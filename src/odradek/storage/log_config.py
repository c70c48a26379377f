"""Topic-level configs by Kafka's names, and the broker properties they default from.

`TOPIC_CONFIGS` defines each per-topic property; `BROKER_SYNONYMS` names the broker
properties that supply its default, most specific first (Kafka's precedence:
`log.retention.ms` over `log.retention.minutes` over `log.retention.hours`).
`LogConfig` is the resolved, typed view a `Log` works with.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from odradek.configdef import LONG_MAX, ConfigDef, ConfigTable, ConfigType

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS

_T = ConfigType
_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


def throttled_replicas_problem(value: Any) -> str | None:
    """Kafka's ThrottledReplicaListValidator: `*`, or `partition:broker` entries."""
    items = [str(v).strip() for v in (value or [])]
    if items and items[0] == "*":
        return None
    if all(_REPLICA.fullmatch(i) for i in items):
        return None
    return ("Must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


TOPIC_CONFIGS = ConfigTable(
    [
        ConfigDef("cleanup.policy", _T.LIST, ["delete"], "delete, compact, or both.",
                  choices=("delete", "compact")),
        ConfigDef("compression.type", _T.STRING, "producer",
                  "Final compression of the topic's batches; 'producer' keeps the producer's.",
                  choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
        ConfigDef("delete.retention.ms", _T.LONG, DAY_MS,
                  "How long tombstones stay readable in a compacted topic.", minimum=0),
        ConfigDef("file.delete.delay.ms", _T.LONG, 60_000,
                  "Delay before a deleted segment's files are removed.", minimum=0),
        ConfigDef("follower.replication.throttled.replicas", _T.LIST, [],
                  "Replicas throttled on the follower side, partition:broker,… or *.",
                  validator=throttled_replicas_problem),
        ConfigDef("flush.messages", _T.LONG, LONG_MAX,
                  "Force an fsync after this many messages.", minimum=1),
        ConfigDef("flush.ms", _T.LONG, LONG_MAX,
                  "Force an fsync when the oldest unflushed message is this old.", minimum=0),
        ConfigDef("index.interval.bytes", _T.INT, 4096,
                  "Bytes of log between two offset index entries.", minimum=0),
        ConfigDef("leader.replication.throttled.replicas", _T.LIST, [],
                  "Replicas throttled on the leader side, partition:broker,… or *.",
                  validator=throttled_replicas_problem),
        ConfigDef("max.compaction.lag.ms", _T.LONG, LONG_MAX,
                  "Longest a message stays ineligible for compaction.", minimum=1),
        ConfigDef("max.message.bytes", _T.INT, 1048588,
                  "Largest record batch the topic accepts.", minimum=0),
        ConfigDef("message.timestamp.type", _T.STRING, "CreateTime",
                  "CreateTime or LogAppendTime.", choices=("CreateTime", "LogAppendTime")),
        ConfigDef("message.timestamp.before.max.ms", _T.LONG, LONG_MAX,
                  "How far in the past a CreateTime timestamp may be.", minimum=0),
        ConfigDef("message.timestamp.after.max.ms", _T.LONG, HOUR_MS,
                  "How far in the future a CreateTime timestamp may be.", minimum=0),
        ConfigDef("message.timestamp.difference.max.ms", _T.LONG, LONG_MAX,
                  "Kafka 3.x's bound on a CreateTime timestamp's distance from now, either "
                  "way; it applies where message.timestamp.before/after.max.ms are not set.",
                  minimum=0),
        ConfigDef("min.cleanable.dirty.ratio", _T.DOUBLE, 0.5,
                  "Dirty share of the log above which the cleaner compacts it.",
                  minimum=0, maximum=1),
        ConfigDef("min.compaction.lag.ms", _T.LONG, 0,
                  "Minimum age before a message may be compacted.", minimum=0),
        ConfigDef("min.insync.replicas", _T.INT, 1,
                  "Replicas that must acknowledge an acks=all write.", minimum=1),
        ConfigDef("preallocate", _T.BOOLEAN, False, "Preallocate segment files."),
        ConfigDef("retention.bytes", _T.LONG, -1,
                  "Largest size of a partition before old segments go; -1 for no limit.",
                  minimum=-1),
        ConfigDef("retention.ms", _T.LONG, 3 * DAY_MS,
                  "Age after which segments are deleted; -1 for no limit.", minimum=-1,
                  kafka_default=7 * DAY_MS,
                  why_different="Kafka's 7 days filled our users' disks; they run 3 days."),
        ConfigDef("segment.bytes", _T.INT, 1 << 30, "Size at which a segment is rolled.",
                  minimum=14),
        ConfigDef("segment.index.bytes", _T.INT, 10 * 1024 * 1024,
                  "Largest offset/time index; a full index rolls the segment.", minimum=4),
        ConfigDef("segment.jitter.ms", _T.LONG, 0, "Random jitter subtracted from segment.ms.",
                  minimum=0),
        ConfigDef("segment.ms", _T.LONG, 7 * DAY_MS, "Age at which a segment is rolled.",
                  minimum=1),
        ConfigDef("unclean.leader.election.enable", _T.BOOLEAN, False,
                  "Allow an out-of-sync replica to become leader, losing data."),
    ]
)

# Broker properties that give each topic config its default, most specific first.
BROKER_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    # (broker property, multiplier to the topic config's unit)
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "compression.type": (("compression.type", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", 1),),
    "flush.messages": (("log.flush.interval.messages", 1),),
    "flush.ms": (("log.flush.interval.ms", 1),),
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "max.message.bytes": (("message.max.bytes", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
    "message.timestamp.difference.max.ms": (("log.message.timestamp.difference.max.ms", 1),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "min.insync.replicas": (("min.insync.replicas", 1),),
    "preallocate": (("log.preallocate", 1),),
    "retention.bytes": (("log.retention.bytes", 1),),
    "retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", 60_000),
        ("log.retention.hours", HOUR_MS),
    ),
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", HOUR_MS)),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", HOUR_MS)),
    "unclean.leader.election.enable": (("unclean.leader.election.enable", 1),),
}


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Resolved topic configuration, attribute per Kafka property (dots → underscores)."""

    cleanup_policy: tuple[str, ...] = ("delete",)
    compression_type: str = "producer"
    delete_retention_ms: int = DAY_MS
    file_delete_delay_ms: int = 60_000
    flush_messages: int = LONG_MAX
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    flush_ms: int = LONG_MAX
    index_interval_bytes: int = 4096
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    max_compaction_lag_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = HOUR_MS
    message_timestamp_difference_max_ms: int = LONG_MAX  # Kafka 3.x; see resolve()
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    min_insync_replicas: int = 1
    preallocate: bool = False
    retention_bytes: int = -1
    retention_ms: int = 3 * DAY_MS
    segment_bytes: int = 1 << 30
    segment_index_bytes: int = 10 * 1024 * 1024
    segment_jitter_ms: int = 0
    segment_ms: int = 7 * DAY_MS
    unclean_leader_election_enable: bool = False

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """The age at which a segment rolls: `segment.ms`, or sooner for a compacted
        topic whose `max.compaction.lag.ms` is shorter (the active segment is never
        cleaned, so it must roll for that lag to be honoured — Kafka's maxSegmentMs)."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def resolve(
        cls, topic_overrides: Mapping[str, Any], broker: Mapping[str, Any] | None = None
    ) -> LogConfig:
        """Per-topic overrides first, then the broker's properties, then the defaults.

        Both mappings hold already-parsed values keyed by Kafka property name.
        """
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for d in TOPIC_CONFIGS:
            value, sources[d.name] = effective_value(d.name, topic_overrides, broker or {})
            if isinstance(value, list):
                value = tuple(value)
            values[d.name.replace(".", "_")] = value
        if sources[_DIFFERENCE] != "default":
            # Kafka 3.6's rule (KIP-937): the deprecated bound fills in for whichever of
            # the two newer ones was left unset.
            for name in ("message.timestamp.before.max.ms", "message.timestamp.after.max.ms"):
                if sources[name] == "default":
                    values[name.replace(".", "_")] = values[_DIFFERENCE.replace(".", "_")]
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


_DIFFERENCE = "message.timestamp.difference.max.ms"


def effective_value(
    name: str, topic_overrides: Mapping[str, Any], broker: Mapping[str, Any]
) -> tuple[Any, str]:
    """(value, source) of one topic config; source as DescribeConfigs names it:
    'topic', the broker property's name, or 'default'."""
    if name in topic_overrides:
        return topic_overrides[name], "topic"
    for prop, multiplier in BROKER_SYNONYMS.get(name, ()):
        if prop in broker and broker[prop] is not None:
            value = broker[prop]
            if multiplier != 1 and isinstance(value, int) and value >= 0:
                value = value * multiplier
            return value, prop
    return TOPIC_CONFIGS[name].default, "default"
