"""Connection limits, applied on the accept path as Kafka's ConnectionQuotas does.

- `max.connections.per.ip` (with `max.connections.per.ip.overrides`, `host:count,…`):
  a connection over its address's limit is closed at once.
- `max.connections` and `listener.name.<l>.max.connections`: a connection over the
  broker's or its listener's count is closed at once. (Kafka leaves it in the accept
  backlog until a slot frees; asyncio's server accepts on its own, so closing is the
  nearest honest behaviour — the client retries after its reconnect backoff.) As in
  Kafka, the inter-broker listener (PLAINTEXT here: brokers replicate over it) is not
  held to the broker-wide count when the broker has other listeners, so clients
  cannot lock replication out; Kafka then also closes the least recently used
  connection of another listener, which odradek does not.
- `max.connection.creation.rate` and `listener.name.<l>.max.connection.creation.rate`:
  past the rate, a new connection waits (its socket is not read) for the time Kafka's
  acceptor would have slept, then is served.
- `connection_creation_rate` quotas of ip entities (AlterClientQuotas): past the rate,
  the connection is held for the throttle time and then closed, as Kafka does.

Refusals are logged at most once a second per reason, with a count of those not
logged, so a flood cannot fill the log either. Sans-IO apart from the clock: the
connection asks `admit` and tells `release`.
"""

from __future__ import annotations

import logging
import socket
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from odradek.configdef import ConfigError
from odradek.security.quotas import QuotaConfigs, Rate, throttle_ms

log = logging.getLogger(__name__)

UNLIMITED = 2**31 - 1  # Kafka's default for every one of these: Int.MaxValue


def parse_overrides(text: str) -> dict[str, int]:
    """`max.connections.per.ip.overrides`: `host:count,…`, hosts resolved to addresses
    once, at start-up (Kafka resolves them with InetAddress.getByName)."""
    out: dict[str, int] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ConfigError(f"Invalid value {item} in max.connections.per.ip.overrides: "
                              "expected host:count")
        try:
            address = socket.gethostbyname(host.strip("[] "))
        except OSError:
            raise ConfigError(f"max.connections.per.ip.overrides: {host} is not a valid IP "
                              "or resolvable host") from None
        out[address] = int(count)
    return out


@dataclass
class Admission:
    refused: str | None = None  # why it is closed at once
    delay_ms: int = 0  # how long it waits before it is served …
    close_after_delay: bool = False  # … or closed (an ip quota's throttle)


@dataclass
class _RateLimitedLog:
    last: dict[str, float] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)

    def warn(self, reason: str, message: str) -> None:
        now = time.monotonic()
        if now - self.last.get(reason, -1e9) < 1.0:
            self.skipped[reason] += 1
            return
        self.last[reason] = now
        more = self.skipped.pop(reason, 0)
        log.warning("%s%s", message, f" ({more} more refused like it)" if more else "")


class ConnectionLimits:
    def __init__(self, max_connections: int = UNLIMITED, per_ip: int = UNLIMITED,
                 per_ip_overrides: Mapping[str, int] | None = None,
                 creation_rate: int = UNLIMITED,
                 listener_max: Mapping[str, int] | None = None,
                 listener_rate: Mapping[str, int] | None = None,
                 ip_quotas: Callable[[], QuotaConfigs] | None = None,
                 clock_ms: Callable[[], int] | None = None,
                 samples: int = 11, window_ms: int = 1000,
                 protected_listener: str | None = None) -> None:
        self.max_connections = max_connections
        self.per_ip = per_ip
        self.per_ip_overrides = dict(per_ip_overrides or {})
        self.creation_rate = creation_rate
        self.listener_max = dict(listener_max or {})
        self.listener_rate = dict(listener_rate or {})
        self.ip_quotas = ip_quotas
        self.protected_listener = protected_listener
        self._clock = clock_ms or (lambda: int(time.monotonic() * 1000))
        self._samples, self._window_ms = samples, window_ms
        self.total = 0
        self.by_ip: Counter[str] = Counter()
        self.by_listener: Counter[str] = Counter()
        self._rates: dict[str, Rate] = {}
        self._log = _RateLimitedLog()

    @classmethod
    def from_config(cls, get: Callable[[str], object], security_props: Mapping[str, str],
                    listeners: list[str],
                    ip_quotas: Callable[[], QuotaConfigs] | None = None,
                    samples: int = 11, window_ms: int = 1000) -> ConnectionLimits:
        per_ip = int(str(get("max.connections.per.ip")))
        overrides = parse_overrides(str(get("max.connections.per.ip.overrides") or ""))
        if per_ip == 0 and not overrides:
            raise ConfigError("max.connections.per.ip can be set to zero only if "
                              "max.connections.per.ip.overrides property is set.")
        listener_max: dict[str, int] = {}
        listener_rate: dict[str, int] = {}
        for name in listeners:
            prefix = f"listener.name.{name.lower()}."
            for key, target in (("max.connections", listener_max),
                                ("max.connection.creation.rate", listener_rate)):
                raw = security_props.get(prefix + key)
                if raw is None:
                    continue
                try:
                    target[name] = int(raw)
                except ValueError:
                    raise ConfigError(f"Invalid value {raw} for configuration "
                                      f"{prefix + key}: Not a number of type INT") from None
                if target[name] < 0:
                    raise ConfigError(f"Invalid value {raw} for configuration "
                                      f"{prefix + key}: Value must be at least 0")
        # Kafka's protectedListener: the inter-broker one, when there are others
        protected = "PLAINTEXT" if "PLAINTEXT" in listeners and len(listeners) > 1 else None
        return cls(int(str(get("max.connections"))), per_ip, overrides,
                   int(str(get("max.connection.creation.rate"))), listener_max,
                   listener_rate, ip_quotas, samples=samples, window_ms=window_ms,
                   protected_listener=protected)

    def _limit_for(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.per_ip)

    def _rate_delay(self, key: str, bound: float, now: int) -> int:
        rate = self._rates.get(key)
        if rate is None:
            rate = self._rates[key] = Rate(self._samples, self._window_ms)
        rate.record(1.0, now)
        return throttle_ms(rate, bound, now)

    def admit(self, listener: str, ip: str) -> Admission:
        """Count a new connection in, or say why not; `release` it when it closes
        (only if admitted)."""
        if self.by_ip[ip] >= self._limit_for(ip):
            return self._refuse("per-ip", f"Rejected connection from {ip}, address already "
                                f"has the configured maximum of {self._limit_for(ip)} "
                                "connections.")
        listener_max = self.listener_max.get(listener, UNLIMITED)
        if self.by_listener[listener] >= listener_max:
            return self._refuse(f"listener-{listener}", f"Rejected connection from {ip} on "
                                f"listener {listener}: it has the configured maximum of "
                                f"{listener_max} connections (listener.name."
                                f"{listener.lower()}.max.connections)")
        if self.total >= self.max_connections and listener != self.protected_listener:
            return self._refuse("broker", f"Rejected connection from {ip}: the broker has "
                                f"the configured maximum of {self.max_connections} "
                                "connections (max.connections)")
        now = self._clock()
        delay = 0
        if self.creation_rate < UNLIMITED:
            delay = self._rate_delay("", self.creation_rate, now)
        rate = self.listener_rate.get(listener)
        if rate is not None and rate < UNLIMITED:
            delay = max(delay, self._rate_delay(f"listener:{listener}", rate, now))
        admission = Admission(delay_ms=delay)
        bound = self.ip_quotas().ip_rate(ip) if self.ip_quotas is not None else None
        if bound is not None:
            ip_delay = self._rate_delay(f"ip:{ip}", bound, now)
            if ip_delay > 0:
                self._log.warn(f"ip-rate-{ip}", f"Connection from {ip} over its "
                               f"connection_creation_rate quota of {bound:g}/s: closing it "
                               f"after {ip_delay} ms")
                admission = Admission(delay_ms=max(delay, ip_delay), close_after_delay=True)
        self.total += 1
        self.by_ip[ip] += 1
        self.by_listener[listener] += 1
        return admission

    def release(self, listener: str, ip: str) -> None:
        self.total -= 1
        self.by_ip[ip] -= 1
        if self.by_ip[ip] <= 0:
            del self.by_ip[ip]
        self.by_listener[listener] -= 1

    def _refuse(self, reason: str, message: str) -> Admission:
        self._log.warn(reason, message)
        return Admission(refused=message)
