"""Client-metrics subscriptions (KIP-714): the `client.metrics` config resources.

A subscription is a named config resource (DescribeConfigs / IncrementalAlterConfigs,
resource type 16) with three configs, as Kafka's ClientMetricsConfigs:
- `metrics`: metric name prefixes to collect (`*` for all; empty for none);
- `interval.ms`: how often a matching client pushes (100 ms to 1 hour, 5 min default);
- `match`: `key=regex` selectors on the client (client_id, client_instance_id,
  client_software_name, client_software_version — as the connection's ApiVersions
  request named them —, client_source_address, client_source_port), all of which must
  match; none matches every client.
A client's subscription (GetTelemetrySubscriptions) is the union of the metrics of the
subscriptions matching it, pushed at the shortest of their intervals.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.protocol.errors import InvalidConfig, InvalidRequest
from odradek.server.configs import AlterOp, ConfigEntry, ConfigSource
from odradek.server.configs import _apply_op as apply_op

if TYPE_CHECKING:
    from odradek.server.configs import ConfigsPort

RESOURCE_TYPE = 16
CLIENT_METRICS_CONFIG = ConfigSource.CLIENT_METRICS_CONFIG
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
MATCH_KEYS = ("client_instance_id", "client_id", "client_software_name",
              "client_software_version", "client_source_address", "client_source_port")
_LIST, _INT = 7, 3  # Kafka's ConfigType codes
_CONFIGS = {  # name: (default, type code, doc)
    "metrics": ("", _LIST, "Telemetry metric name prefixes; '*' for all."),
    "interval.ms": (str(DEFAULT_INTERVAL_MS), _INT, "Client telemetry push interval."),
    "match": ("", _LIST, "key=regex selectors on client attributes."),
}


@dataclass(frozen=True)
class Subscription:
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, client: Mapping[str, str]) -> bool:
        return all(p.fullmatch(client.get(k, "")) for k, p in self.match)


def _items(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def parse(name: str, configs: Mapping[str, str]) -> Subscription:
    """A stored or proposed subscription; InvalidConfig/InvalidRequest as Kafka says."""
    for key in configs:
        if key not in _CONFIGS:
            raise InvalidRequest(f"Unknown client metric configuration: {key}")
    try:
        interval = int(configs.get("interval.ms", DEFAULT_INTERVAL_MS))
    except ValueError:
        raise InvalidConfig(f"Invalid value {configs['interval.ms']} for configuration "
                            "interval.ms: Not a number of type INT") from None
    if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
        raise InvalidConfig(f"Invalid value {interval} for interval.ms, interval must be "
                            f"between {MIN_INTERVAL_MS} and {MAX_INTERVAL_MS}")
    match = []
    for selector in _items(configs.get("match", "")):
        key, eq, pattern = selector.partition("=")
        if not eq or key.strip() not in MATCH_KEYS or not pattern.strip():
            raise InvalidConfig(f"Illegal client matching pattern: {selector}")
        try:
            match.append((key.strip(), re.compile(pattern.strip())))
        except re.error:
            raise InvalidConfig(f"Illegal regex pattern: {pattern}") from None
    return Subscription(name, tuple(_items(configs.get("metrics", ""))), interval,
                        tuple(match))


def describe(ports: ConfigsPort, name: str) -> list[ConfigEntry]:
    if not name:
        raise InvalidRequest("Subscription name can't be empty")
    stored = ports.metadata.image.client_metrics.get(name, {})
    return [
        ConfigEntry(key, stored.get(key, default),
                    CLIENT_METRICS_CONFIG if key in stored else ConfigSource.DEFAULT_CONFIG,
                    False, False, type_code, doc, ())
        for key, (default, type_code, doc) in _CONFIGS.items()
    ]


async def apply(ports: ConfigsPort, name: str, ops: list[tuple[str, AlterOp, str | None]], *,
                incremental: bool, validate_only: bool) -> None:
    if not name:
        raise InvalidRequest("Subscription name can't be empty")
    current: dict[str, str | None] = (
        dict(ports.metadata.image.client_metrics.get(name, {})) if incremental else {})
    for key, op, value in ops:
        if key not in _CONFIGS:
            raise InvalidRequest(f"Unknown client metric configuration: {key}")
        apply_op(current, key, op, value, _CONFIGS[key][1] == _LIST, [])
    cleaned = {k: v for k, v in current.items() if v is not None}
    parse(name, cleaned)
    if not validate_only:
        await ports.metadata.set_client_metrics(name, cleaned)


@dataclass(frozen=True)
class ClientSubscription:
    """What a client is told to push: its id is a hash of the content, so a changed
    subscription gets a new id and the client's next push learns it is stale."""

    subscription_id: int
    metrics: tuple[str, ...]  # ("",) for all, () for none
    interval_ms: int


def for_client(subscriptions: Mapping[str, Mapping[str, str]],
               client: Mapping[str, str]) -> ClientSubscription:
    metrics: set[str] = set()
    interval = None
    for name, configs in sorted(subscriptions.items()):
        try:
            sub = parse(name, configs)
        except (InvalidConfig, InvalidRequest):
            continue
        if not sub.metrics or not sub.matches(client):
            continue
        metrics.update("" if m == "*" else m for m in sub.metrics)
        interval = sub.interval_ms if interval is None else min(interval, sub.interval_ms)
    chosen = ("",) if "" in metrics else tuple(sorted(metrics))
    interval_ms = DEFAULT_INTERVAL_MS if interval is None else interval
    digest = zlib.crc32(f"{chosen}|{interval_ms}".encode()) & 0x7FFFFFFF
    return ClientSubscription(digest, chosen, interval_ms)
