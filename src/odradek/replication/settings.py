"""The broker properties replication reads, with Kafka's defaults.

The replica manager is built before it is told the broker's configuration (and tests
build it bare), so it starts from these defaults and `ReplicaManager.configure` reads
the real values by Kafka's property names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from odradek.configdef import ConfigError

RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
SELECTORS = (RACK_AWARE_SELECTOR, "org.apache.kafka.common.replica.LeaderSelector")


@dataclass(frozen=True, slots=True)
class ReplicaSettings:
    lag_time_max_ms: int = 30_000
    num_fetchers: int = 1
    fetch_max_bytes: int = 1_048_576
    fetch_response_max_bytes: int = 10_485_760
    fetch_wait_max_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_backoff_ms: int = 1000
    socket_timeout_ms: int = 30_000
    hw_checkpoint_interval_ms: int = 5000
    socket_receive_buffer_bytes: int = 65_536
    rack_aware_selector: bool = False  # replica.selector.class (KIP-392)
    quota_window_num: int = 11  # replication.quota.window.num (KIP-73)
    quota_window_size_s: int = 1

    def __post_init__(self) -> None:
        # Kafka's own start-up checks (KafkaConfig)
        if self.fetch_wait_max_ms > self.socket_timeout_ms:
            raise ConfigError("replica.socket.timeout.ms should always be at least "
                              "replica.fetch.wait.max.ms to prevent unnecessary socket "
                              "timeouts")
        if self.fetch_wait_max_ms > self.lag_time_max_ms:
            raise ConfigError("replica.fetch.wait.max.ms should always be less than or "
                              "equal to replica.lag.time.max.ms to prevent frequent changes "
                              "in ISR")

    @classmethod
    def from_config(cls, get: Callable[[str], Any]) -> ReplicaSettings:
        """From a lookup by property name (e.g. `BrokerConfig.__getitem__`)."""
        return cls(
            lag_time_max_ms=int(get("replica.lag.time.max.ms")),
            num_fetchers=int(get("num.replica.fetchers")),
            fetch_max_bytes=int(get("replica.fetch.max.bytes")),
            fetch_response_max_bytes=int(get("replica.fetch.response.max.bytes")),
            fetch_wait_max_ms=int(get("replica.fetch.wait.max.ms")),
            fetch_min_bytes=int(get("replica.fetch.min.bytes")),
            fetch_backoff_ms=int(get("replica.fetch.backoff.ms")),
            socket_timeout_ms=int(get("replica.socket.timeout.ms")),
            hw_checkpoint_interval_ms=int(get("replica.high.watermark.checkpoint.interval.ms")),
            socket_receive_buffer_bytes=int(get("replica.socket.receive.buffer.bytes")),
            rack_aware_selector=_selector(get("replica.selector.class")),
            quota_window_num=int(get("replication.quota.window.num")),
            quota_window_size_s=int(get("replication.quota.window.size.seconds")),
        )


def _selector(name: Any) -> bool:
    if not name:
        return False
    chosen = str(name).strip()
    if chosen not in SELECTORS:
        raise ConfigError(f"replica.selector.class: {chosen} is not one this broker runs "
                          f"({', '.join(SELECTORS)})")
    return chosen == RACK_AWARE_SELECTOR
