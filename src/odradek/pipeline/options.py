"""The `odradek` source's options, read and checked the way Spark's Kafka source reads them.

Pure: no broker, no Spark. Everything here runs on the driver when a query is planned,
so a misspelt option fails the query before any task starts.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

EARLIEST = -2
LATEST = -1

# Options the source sets itself on its consumers; a user value would break the contract.
_FORBIDDEN_KAFKA_PARAMS = {
    "auto.offset.reset": "set startingOffsets instead",
    "enable.auto.commit": "the source commits processed offsets itself",
    "key.deserializer": "keys are always read as bytes",
    "value.deserializer": "values are always read as bytes",
    "interceptor.classes": "not supported",
}


class OptionError(ValueError):
    """An option is missing, malformed or contradicts another."""


class Subscription(Enum):
    SUBSCRIBE = "subscribe"
    PATTERN = "subscribePattern"
    ASSIGN = "assign"


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or stop: `earliest`, `latest`, per-partition offsets or timestamps."""

    kind: str  # "earliest" | "latest" | "offsets" | "timestamp" | "timestamps"
    # "offsets": {topic: {partition: offset or -2/-1}}; "timestamps": {topic: {partition: ms}}
    per_partition: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    timestamp_ms: int | None = None  # "timestamp": one timestamp for every partition

    @staticmethod
    def earliest() -> OffsetSpec:
        return OffsetSpec("earliest")

    @staticmethod
    def latest() -> OffsetSpec:
        return OffsetSpec("latest")


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    subscription: Subscription
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    starting: OffsetSpec = field(default_factory=OffsetSpec.latest)
    ending: OffsetSpec = field(default_factory=OffsetSpec.latest)
    # "error" fails when no offset has a timestamp at or after the one asked; "latest" uses
    # the end of the partition, as Spark's `startingOffsetsByTimestampStrategy` does.
    by_timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    group_id: str = ""
    commit_to_group: bool = True
    # Options passed through to every consumer (the `kafka.` prefix stripped).
    kafka_params: Mapping[str, str] = field(default_factory=dict)
    arrow: bool = True
    # One row per offset range instead of the records: for a job whose tasks read the
    # records themselves (the lake's Arrow lane), sparing their trip through the JVM.
    ranges_only: bool = False
    poll_timeout_s: float = 120.0
    # Deadline of the driver's metadata and offset requests (Kafka's default.api.timeout.ms).
    api_timeout_s: float = 30.0

    def matches(self, topic: str) -> bool:
        """Is this topic part of the subscription (ignoring assign's partition list)?"""
        if self.subscription is Subscription.SUBSCRIBE:
            return topic in self.topics
        if self.subscription is Subscription.PATTERN:
            assert self.pattern is not None
            return re.fullmatch(self.pattern, topic) is not None
        return topic in self.assigned

    @property
    def read_committed(self) -> bool:
        return self.kafka_params.get("isolation.level", "") == "read_committed"

    def consumer_config(self) -> dict[str, str | int | float | bool]:
        """librdkafka settings for the consumers that read offset ranges on executors."""
        conf: dict[str, str | int | float | bool] = {
            "bootstrap.servers": self.bootstrap_servers,
            # A group id is mandatory for confluent-kafka consumers; executors never join or
            # commit with it, so give them a name of their own that never shows lag.
            "group.id": f"{self.group_id}-executor",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
            "enable.partition.eof": True,
            # librdkafka's defaults stall a reader for up to a second between fetches once
            # its queue is full. Not 0: then the fetch thread spins while the queue is full
            # (measured: 1.2-1.5 µs of CPU a record against 0.37 at 1-20 ms, and the spin
            # slows the task's own thread too). 500 k records queued outlast 5 ms at any rate.
            "fetch.queue.backoff.ms": 5,
            "queued.min.messages": 500_000,
            "fetch.wait.max.ms": 100,
            "max.partition.fetch.bytes": 8 * 1024 * 1024,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "log_level": 3,
            # Spark's Kafka source reads uncommitted by default; librdkafka would read
            # committed, hiding records Spark's semantics promise.
            "isolation.level": "read_uncommitted",
        }
        conf.update(self.kafka_params)
        return conf


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise OptionError(f"option {key}={raw!r}: expected true or false")


def _positive_int(options: Mapping[str, str], key: str) -> int | None:
    raw = options.get(key)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option {key}={raw!r}: expected a positive integer") from None
    if value <= 0:
        raise OptionError(f"option {key}={raw!r}: expected a positive integer")
    return value


def _partition_map(key: str, raw: str) -> dict[str, dict[int, int]]:
    """Spark's per-partition JSON: {"topicA": {"0": 23, "1": -1}, "topicB": {"0": -2}}."""
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as e:
        raise OptionError(f"option {key}: not valid JSON ({e.msg}): {raw!r}") from None
    if not isinstance(parsed, dict):
        raise OptionError(f"option {key}: expected {{\"topic\": {{\"partition\": offset}}}}")
    result: dict[str, dict[int, int]] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise OptionError(f"option {key}: topic {topic!r} must map partitions to numbers")
        result[topic] = {}
        for p, value in parts.items():
            try:
                result[topic][int(p)] = int(value)
            except (TypeError, ValueError):
                raise OptionError(
                    f"option {key}: {topic}[{p}]={value!r} is not a number") from None
    return result


def _offset_spec(options: Mapping[str, str], prefix: str, default: OffsetSpec,
                 streaming: bool) -> OffsetSpec:
    """Read startingX / endingX; the timestamp forms take precedence, as in Spark."""
    if prefix == "ending" and streaming and any(
            f"ending{suffix}" in options for suffix in (
                "Offsets", "Timestamp", "OffsetsByTimestamp")):
        raise OptionError("endingOffsets and endingTimestamp are for batch queries only")
    single = options.get(f"{prefix}Timestamp")
    if single is not None:
        try:
            return OffsetSpec("timestamp", timestamp_ms=int(single))
        except ValueError:
            raise OptionError(
                f"option {prefix}Timestamp={single!r}: expected milliseconds") from None
    by_ts = options.get(f"{prefix}OffsetsByTimestamp")
    if by_ts is not None:
        return OffsetSpec("timestamps", per_partition=_partition_map(
            f"{prefix}OffsetsByTimestamp", by_ts))
    raw = options.get(f"{prefix}Offsets")
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in ("earliest", "latest"):
        spec = OffsetSpec(word)
    else:
        spec = OffsetSpec("offsets", per_partition=_partition_map(f"{prefix}Offsets", raw))
    if prefix == "ending":
        if spec.kind == "earliest" or any(
                o == EARLIEST for parts in spec.per_partition.values() for o in parts.values()):
            raise OptionError("endingOffsets cannot be earliest (-2)")
    elif not streaming and (spec.kind == "latest" or any(
            o == LATEST for parts in spec.per_partition.values() for o in parts.values())):
        raise OptionError("startingOffsets cannot be latest (-1) for a batch query")
    return spec


def default_group_id(options: Mapping[str, str], prefix: str) -> str:
    """A stable group name, so lag tools follow one pipeline across restarts."""
    ident = "|".join(options.get(k, "") for k in (
        "kafka.bootstrap.servers", "subscribe", "subscribePattern", "assign"))
    return f"{prefix}-{hashlib.sha1(ident.encode()).hexdigest()[:12]}"


def parse_options(raw: Mapping[str, str], streaming: bool) -> SourceOptions:
    """Check every option the way Spark's Kafka source does, with messages that say why."""
    options = {k: v for k, v in raw.items()}
    lowered = {k.lower(): k for k in options}

    def get(name: str) -> str | None:
        key = lowered.get(name.lower())
        return options[key] if key is not None else None

    canon = {name: value for name in (
        "kafka.bootstrap.servers", "subscribe", "subscribePattern", "assign",
        "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
        "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
        "startingOffsetsByTimestampStrategy", "maxOffsetsPerTrigger", "minPartitions",
        "failOnDataLoss", "includeHeaders", "groupIdPrefix", "kafka.group.id",
        "commitOffsetsToGroup", "arrow", "pollTimeoutMs", "kafka.default.api.timeout.ms",
        "rangesOnly",
    ) if (value := get(name)) is not None}

    bootstrap = canon.get("kafka.bootstrap.servers")
    if not bootstrap:
        raise OptionError("option kafka.bootstrap.servers is required")

    chosen = [s for s in Subscription if s.value in canon]
    if len(chosen) != 1:
        raise OptionError(
            "exactly one of subscribe, subscribePattern or assign is required"
            + (f" (got {', '.join(s.value for s in chosen)})" if chosen else ""))
    subscription = chosen[0]
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: dict[str, tuple[int, ...]] = {}
    if subscription is Subscription.SUBSCRIBE:
        topics = tuple(t.strip() for t in canon["subscribe"].split(",") if t.strip())
        if not topics:
            raise OptionError("option subscribe: no topic named")
    elif subscription is Subscription.PATTERN:
        pattern = canon["subscribePattern"]
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError(f"option subscribePattern={pattern!r}: {e}") from None
    else:
        try:
            parsed = json.loads(canon["assign"])
            assigned = {t: tuple(int(p) for p in ps) for t, ps in parsed.items()}
        except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
            raise OptionError(
                f"option assign={canon['assign']!r}: expected {{\"topic\": [0, 1]}}") from None

    strategy = canon.get("startingOffsetsByTimestampStrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise OptionError("startingOffsetsByTimestampStrategy must be error or latest")

    kafka_params: dict[str, str] = {}
    for key, value in options.items():
        if not key.lower().startswith("kafka.") or key.lower() in (
                "kafka.bootstrap.servers", "kafka.group.id", "kafka.default.api.timeout.ms"):
            continue
        name = key[len("kafka."):]
        if name in _FORBIDDEN_KAFKA_PARAMS:
            raise OptionError(f"option {key} is not supported: {_FORBIDDEN_KAFKA_PARAMS[name]}")
        kafka_params[name] = value
    isolation = kafka_params.get("isolation.level")
    if isolation is not None and isolation not in ("read_committed", "read_uncommitted"):
        raise OptionError(f"kafka.isolation.level={isolation!r}: read_committed or "
                          "read_uncommitted")

    max_per_trigger = _positive_int(canon, "maxOffsetsPerTrigger")
    if max_per_trigger is not None and not streaming:
        raise OptionError("maxOffsetsPerTrigger is for streaming queries only")

    prefix = canon.get("groupIdPrefix", "spark-kafka-source" if streaming
                       else "spark-kafka-relation")
    group_id = canon.get("kafka.group.id") or default_group_id(canon, prefix)
    poll_ms = _positive_int(canon, "pollTimeoutMs")
    api_ms = _positive_int(canon, "kafka.default.api.timeout.ms")

    return SourceOptions(
        bootstrap_servers=bootstrap,
        subscription=subscription,
        topics=topics,
        pattern=pattern,
        assigned=assigned,
        starting=_offset_spec(canon, "starting",
                              OffsetSpec.latest() if streaming else OffsetSpec.earliest(),
                              streaming),
        ending=_offset_spec(canon, "ending", OffsetSpec.latest(), streaming),
        by_timestamp_strategy=strategy,
        max_offsets_per_trigger=max_per_trigger,
        min_partitions=_positive_int(canon, "minPartitions"),
        fail_on_data_loss=_bool(canon, "failOnDataLoss", True),
        include_headers=_bool(canon, "includeHeaders", False),
        group_id=group_id,
        commit_to_group=_bool(canon, "commitOffsetsToGroup", True),
        kafka_params=kafka_params,
        arrow=_bool(canon, "arrow", True),
        ranges_only=_bool(canon, "rangesOnly", False),
        poll_timeout_s=(poll_ms / 1000.0) if poll_ms else 120.0,
        api_timeout_s=(api_ms / 1000.0) if api_ms else 30.0,
    )
