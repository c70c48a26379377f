"""Client quotas and connection-creation rates, sans-IO: bytes and clock values in,
throttle milliseconds out — Kafka's ClientQuotaManager arithmetic.

- `Rate` is Kafka's sampled rate (`quota.window.num` samples of
  `quota.window.size.seconds`, the oldest sample's start as the window, at least N-1
  full windows), and `throttle_ms` is Kafka's `(value - bound) / bound * window`.
- `QuotaConfigs` holds the configured entities (`user`, `client-id`, both, `<default>`
  as None) and resolves a connection's quota in Kafka's precedence order:
  user+client-id, user+default client, user, default user+client-id, default user+default
  client, default user, client-id, default client-id. Clients resolved to the same
  entity share one rate (all of alice's clients under a `user=alice` quota).
- `ClientQuotaManager` records produce bytes, fetch bytes or request time per
  (principal, client-id) and answers the throttle time; `ConnectionRateQuota` does the
  same for connection creation (per IP, per listener, per broker).
"""

from __future__ import annotations

import ipaddress
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from odradek.protocol.errors import ErrorCode, KafkaError

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"  # mutation_quota.py enforces it
CONNECTION_CREATION_RATE = "connection_creation_rate"
USER_CLIENT_KEYS = {PRODUCER_BYTE_RATE: "LONG", CONSUMER_BYTE_RATE: "LONG",
                    REQUEST_PERCENTAGE: "DOUBLE", CONTROLLER_MUTATION_RATE: "DOUBLE"}
IP_KEYS = {CONNECTION_CREATION_RATE: "INT"}
DEFAULT = "<default>"  # how ZooKeeper and the tools name a default entity
NANOS_TO_PERCENTAGE = 100.0 / 1e9  # one thread fully busy for a second = 100%


class InvalidQuota(KafkaError):
    code = ErrorCode.invalid_request


@dataclass
class _Sample:
    start_ms: int
    last_event_ms: int
    value: float = 0.0
    events: int = 0

    def reset(self, now: int) -> None:
        self.start_ms = self.last_event_ms = now
        self.value = 0.0
        self.events = 0


@dataclass
class Rate:
    """Kafka's Rate over a SampledStat (per second)."""

    samples: int = 11
    window_ms: int = 1000
    _samples: list[_Sample] = field(default_factory=list)
    _current: int = 0

    def _cur(self, now: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now, now))
        return self._samples[self._current]

    def record(self, value: float, now: int) -> None:
        s = self._cur(now)
        if now - s.start_ms >= self.window_ms:
            # one extra placeholder sample, as Kafka keeps for the overlapping window
            self._current = (self._current + 1) % (self.samples + 1)
            if self._current >= len(self._samples):
                s = _Sample(now, now)
                self._samples.append(s)
            else:
                s = self._samples[self._current]
                s.reset(now)
        s.value += value
        s.events += 1
        s.last_event_ms = now

    def _purge(self, now: int) -> None:
        expire = self.samples * self.window_ms
        for s in self._samples:
            if now - s.last_event_ms >= expire:
                s.reset(now)

    def window_size_ms(self, now: int) -> int:
        self._purge(now)
        oldest = min((s.start_ms for s in self._samples), default=now)
        elapsed = now - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return elapsed

    def measure(self, now: int) -> float:
        window = self.window_size_ms(now)
        total = sum(s.value for s in self._samples)
        return total / (window / 1000.0)


def throttle_ms(rate: Rate, bound: float, now: int) -> int:
    """QuotaUtils.throttleTime: how long until the rate falls back to the bound, with no
    new data; 0 within the quota."""
    window = rate.window_size_ms(now)
    value = sum(s.value for s in rate._samples) / (window / 1000.0)
    if value <= bound:
        return 0
    return round((value - bound) / bound * window)


# --- the configured quotas ----------------------------------------------------------

EntityKey = tuple[str | None, str | None]  # (user, client-id); "" absent, None = default


def _entity_key(entity: Mapping[str, str | None]) -> EntityKey:
    user = entity.get("user", "")
    client = entity.get("client-id", "")
    return (user, client)


def validate_alteration(entity: Mapping[str, str | None], key: str, value: float | None) -> None:
    """What Kafka's controller refuses in AlterClientQuotas, with its messages. Entity
    names of None are defaults; `value` None removes the key."""
    if not entity:
        raise InvalidQuota("Invalid empty client quota entity")
    for etype, name in entity.items():
        if etype not in ("user", "client-id", "ip"):
            raise InvalidQuota(f"Unhandled client quota entity type: {etype}")
        if name is not None and name == "":
            raise InvalidQuota(f"Empty {etype} not supported")
    if "ip" in entity:
        if len(entity) > 1:
            raise InvalidQuota("Invalid quota entity combination, IP entity should"
                               "not be combined with User or ClientId")
        ip = entity["ip"]
        if ip is not None:
            try:
                ipaddress.ip_address(ip)
            except ValueError:
                raise InvalidQuota(f"{ip} is not a valid IP or resolvable host.") from None
        keys = IP_KEYS
    else:
        keys = USER_CLIENT_KEYS
    if key not in keys:
        raise InvalidQuota(f"Invalid configuration key {key}")
    if value is None:
        return
    if not math.isfinite(value) or value <= 0.0:
        raise InvalidQuota(f"Quota {key} must be greater than 0")
    if keys[key] in ("LONG", "INT"):
        if keys[key] == "INT" and value > 2**31 - 1:
            raise InvalidQuota(f"Proposed value for {key} is too large for an INT.")
        if abs(value % 1.0) > 1e-6:
            raise InvalidQuota(f"{key} cannot be a fractional value.")


@dataclass
class QuotaConfigs:
    """Configured quotas by entity: `{(user, client_id): {key: value}}`, where a part is
    "" when the entity does not name it and None for `<default>`."""

    entities: dict[EntityKey, dict[str, float]] = field(default_factory=dict)
    ips: dict[str | None, float] = field(default_factory=dict)  # connection_creation_rate
    _resolved: dict[tuple[str, str, str], tuple[EntityKey, float | None]] = field(
        default_factory=dict, repr=False, compare=False)

    def alter(self, entity: Mapping[str, str | None], key: str, value: float | None) -> None:
        """One AlterClientQuotas op (validated as Kafka); value None removes it."""
        validate_alteration(entity, key, value)
        self._resolved.clear()
        if "ip" in entity:
            if value is None:
                self.ips.pop(entity["ip"], None)
            else:
                self.ips[entity["ip"]] = value
            return
        ek = _entity_key(entity)
        current = self.entities.setdefault(ek, {})
        if value is None:
            current.pop(key, None)
            if not current:
                del self.entities[ek]
        else:
            current[key] = value

    def describe(self) -> Iterable[tuple[dict[str, str | None], dict[str, float]]]:
        """Every entity and its values, for DescribeClientQuotas."""
        for (user, client), values in self.entities.items():
            entity: dict[str, str | None] = {}
            if user != "":
                entity["user"] = user
            if client != "":
                entity["client-id"] = client
            yield entity, dict(values)
        for ip, rate in self.ips.items():
            yield {"ip": ip}, {CONNECTION_CREATION_RATE: rate}

    def resolve(self, key: str, user: str, client_id: str) -> tuple[EntityKey, float | None]:
        """(the sharing entity, the bound) for a connection in Kafka's precedence order;
        bound None when no quota applies. Remembered per client until the next change:
        every quota-bound request asks."""
        found = self._resolved.get((key, user, client_id))
        if found is None:
            found = self._resolved[(key, user, client_id)] = self._resolve(key, user,
                                                                           client_id)
        return found

    def _resolve(self, key: str, user: str, client_id: str) -> tuple[EntityKey, float | None]:
        order: list[tuple[EntityKey, EntityKey]] = [
            ((user, client_id), (user, client_id)),
            ((user, None), (user, client_id)),
            ((user, ""), (user, "")),
            ((None, client_id), (user, client_id)),
            ((None, None), (user, client_id)),
            ((None, ""), (user, "")),
            (("", client_id), ("", client_id)),
            (("", None), ("", client_id)),
        ]
        for configured, sharing in order:
            values = self.entities.get(configured)
            if values and key in values:
                return sharing, values[key]
        return ("", client_id), None

    @classmethod
    def from_stored(cls, stored: Mapping[str, Mapping[str, str]]) -> QuotaConfigs:
        """The quotas a metadata store keeps: {ZooKeeper path: {key: value}}."""
        configs = cls()
        for path, values in stored.items():
            entity = entity_from_zk_path(path)
            keys = IP_KEYS if "ip" in entity else USER_CLIENT_KEYS
            for key, raw in values.items():
                if key in keys:  # other keys of /config/users (SCRAM) are not quotas
                    configs.alter(entity, key, _number(path, key, raw))
        return configs

    def ip_rate(self, ip: str) -> float | None:
        return self.ips.get(ip, self.ips.get(None))

    def apply_zk_config(self, path: str, data: bytes | None) -> None:
        """Make an entity's quotas what its `/config/users|clients|ips/…` znode says
        (`{"version":1,"config":{"producer_byte_rate":"1024",…}}`); other keys in the
        znode (SCRAM credentials) are not quotas and are left alone."""
        entity = entity_from_zk_path(path)
        keys = IP_KEYS if "ip" in entity else USER_CLIENT_KEYS
        config: dict[str, object] = {}
        if data:
            try:
                js = json.loads(data)
                config = dict(js.get("config", {}))
            except (ValueError, AttributeError, TypeError):
                raise InvalidQuota(f"{path}: not a config znode") from None
        for key in keys:
            raw = config.get(key)
            value = None if raw is None else _number(path, key, raw)
            current = (self.ips.get(entity["ip"]) if "ip" in entity
                       else self.entities.get(_entity_key(entity), {}).get(key))
            if value is None and current is None:
                continue
            self.alter(entity, key, value)

    @staticmethod
    def zk_path(entity: Mapping[str, str | None]) -> str:
        """`/config/users/<u>[/clients/<c>]`, `/config/clients/<c>`, `/config/ips/<ip>`."""
        def n(v: str | None) -> str:
            return DEFAULT if v is None else v
        if "ip" in entity:
            return f"/config/ips/{n(entity['ip'])}"
        if "user" in entity:
            base = f"/config/users/{n(entity['user'])}"
            return f"{base}/clients/{n(entity['client-id'])}" if "client-id" in entity else base
        return f"/config/clients/{n(entity['client-id'])}"


def stored_value(key: str, value: float) -> str:
    """A quota value as Kafka writes it into a config znode: longs without a fraction."""
    kind = IP_KEYS.get(key) or USER_CLIENT_KEYS.get(key)
    return str(int(value)) if kind in ("LONG", "INT") else repr(float(value))


def _number(path: str, key: str, raw: object) -> float:
    try:
        return float(str(raw))
    except ValueError:
        raise InvalidQuota(f"{path}: {key} is not a number") from None


def entity_from_zk_path(path: str) -> dict[str, str | None]:
    """The entity of a quota znode path; `<default>` becomes None."""
    def n(v: str) -> str | None:
        return None if v == DEFAULT else v
    parts = path.strip("/").split("/")
    if len(parts) == 3 and parts[:2] == ["config", "users"]:
        return {"user": n(parts[2])}
    if len(parts) == 5 and parts[:2] == ["config", "users"] and parts[3] == "clients":
        return {"user": n(parts[2]), "client-id": n(parts[4])}
    if len(parts) == 3 and parts[:2] == ["config", "clients"]:
        return {"client-id": n(parts[2])}
    if len(parts) == 3 and parts[:2] == ["config", "ips"]:
        return {"ip": n(parts[2])}
    raise InvalidQuota(f"not a quota entity path: {path}")


# --- enforcement --------------------------------------------------------------------

@dataclass
class ClientQuotaManager:
    """One quota type (`producer_byte_rate`, `consumer_byte_rate` or
    `request_percentage`) for every (user, client-id)."""

    configs: QuotaConfigs
    key: str
    samples: int = 11  # quota.window.num
    window_ms: int = 1000  # quota.window.size.seconds * 1000
    _rates: dict[EntityKey, Rate] = field(default_factory=dict)

    def _rate(self, sharing: EntityKey) -> Rate:
        rate = self._rates.get(sharing)
        if rate is None:
            rate = self._rates[sharing] = Rate(self.samples, self.window_ms)
        return rate

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record bytes (or, for request_percentage, the percentage from
        `request_time_percentage`) and return the throttle time in ms (0: within quota)."""
        sharing, bound = self.configs.resolve(self.key, user, client_id)
        if bound is None:
            return 0  # measured only under a quota: a client without one costs nothing
        rate = self._rate(sharing)
        rate.record(value, now_ms)
        ms = throttle_ms(rate, bound, now_ms)
        if self.key == REQUEST_PERCENTAGE:
            ms = min(ms, self.window_ms)  # Kafka bounds request throttles by one window
        return ms

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled fetch answers empty, as Kafka)."""
        sharing, bound = self.configs.resolve(self.key, user, client_id)
        if bound is not None:
            self._rate(sharing).record(-value, now_ms)

    def rate(self, user: str, client_id: str, now_ms: int) -> float:
        sharing, _ = self.configs.resolve(self.key, user, client_id)
        return self._rate(sharing).measure(now_ms)


def request_time_percentage(thread_time_ns: int) -> float:
    return thread_time_ns * NANOS_TO_PERCENTAGE


@dataclass
class ConnectionRateQuota:
    """Connection-creation rate: per IP (`connection_creation_rate` on ip entities) and
    a broker- or listener-wide `max.connection.creation.rate`. `record` returns how long
    to delay (per IP: Kafka closes the connection after that delay; wide: the acceptor
    waits before accepting more)."""

    configs: QuotaConfigs
    max_rate: float | None = None  # max.connection.creation.rate (per listener)
    samples: int = 11
    window_ms: int = 1000
    _ip_rates: dict[str, Rate] = field(default_factory=dict)
    _total: Rate | None = None

    def record(self, ip: str, now_ms: int) -> int:
        delay = 0
        if self.max_rate is not None:
            if self._total is None:
                self._total = Rate(self.samples, self.window_ms)
            self._total.record(1.0, now_ms)
            delay = throttle_ms(self._total, self.max_rate, now_ms)
        bound = self.configs.ip_rate(ip)
        if bound is not None:
            rate = self._ip_rates.setdefault(ip, Rate(self.samples, self.window_ms))
            rate.record(1.0, now_ms)
            delay = max(delay, throttle_ms(rate, bound, now_ms))
        return delay
