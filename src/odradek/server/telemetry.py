"""Client telemetry (KIP-714): which clients push what, and their last values on the
broker's Prometheus endpoint.

GetTelemetrySubscriptions gives a client an instance id (when it has none) and its
subscription (client_metrics.py); PushTelemetry brings OTLP metrics, decoded by
protocol/otlp.py. The last value of each (client, metric, labels) is exported as
`<metric name, dots as underscores>{client_instance_id, client_id, <OTLP attributes>}`, next
to the broker's own metrics; a client's series go when it says it is terminating or
goes silent for three of its intervals. Updates happen on the event loop; a scrape
reads a copy taken under a lock, in the HTTP server's thread.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from odradek.protocol.compression import decompress
from odradek.protocol.errors import CorruptMessage, ErrorCode, UnsupportedCompressionType
from odradek.protocol.otlp import decode_metrics
from odradek.server.client_metrics import ClientSubscription, for_client

# Kafka's order of preference: ZSTD, LZ4, GZIP, SNAPPY
ACCEPTED_COMPRESSION = (4, 3, 1, 2)
ZERO = uuid.UUID(int=0)
# connections whose client software (from ApiVersions v3+) is remembered, newest kept
SOFTWARE_MEMORY = 65536
_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")


def _prom_name(name: str) -> str:
    cleaned = _UNSAFE.sub("_", name)
    return cleaned if not cleaned[:1].isdigit() else f"_{cleaned}"


@dataclass
class _Client:
    attributes: dict[str, str]
    subscription: ClientSubscription
    seen: float  # last request of this client, either API
    last_push: float | None = None
    # (prometheus name, labels) -> value
    values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)


class ClientTelemetry(Collector):
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clients: dict[uuid.UUID, _Client] = {}
        self._lock = threading.Lock()
        self._clock = clock
        self._expired_at = 0.0
        self._software: OrderedDict[tuple[str, int], tuple[str, str]] = OrderedDict()

    def note_software(self, host: str, port: int, name: str, version: str) -> None:
        """A connection's client software, as its ApiVersions request named it: the
        client_software_name/version a subscription's `match` may select on."""
        self._software[(host, port)] = (name, version)
        self._software.move_to_end((host, port))
        while len(self._software) > SOFTWARE_MEMORY:
            self._software.popitem(last=False)

    def software(self, host: str, port: int) -> tuple[str, str]:
        return self._software.get((host, port), ("", ""))

    def subscribe(self, instance_id: uuid.UUID | None, attributes: dict[str, str],
                  subscriptions: Mapping[str, Mapping[str, str]]
                  ) -> tuple[uuid.UUID, ClientSubscription]:
        if instance_id is None or instance_id == ZERO:
            instance_id = uuid.uuid4()
        attributes = {**attributes, "client_instance_id": str(instance_id)}
        subscription = for_client(subscriptions, attributes)
        now = self._clock()
        with self._lock:
            known = self._clients.get(instance_id)
            if known is None:
                self._clients[instance_id] = _Client(attributes, subscription, now)
            else:
                known.attributes, known.subscription, known.seen = attributes, subscription, now
        self._expire()
        return instance_id, subscription

    def push(self, instance_id: uuid.UUID | None, subscription_id: int, terminating: bool,
             compression: int, payload: bytes, max_bytes: int
             ) -> tuple[ErrorCode, str | None]:
        """The push's error code and message, Kafka's for each refusal."""
        if instance_id is None or instance_id == ZERO:
            return ErrorCode.invalid_request, "Invalid client instance id"
        with self._lock:
            client = self._clients.get(instance_id)
        if client is None or client.subscription.subscription_id != subscription_id:
            return ErrorCode.unknown_subscription_id, (
                f"Unknown client subscription id for the client: {instance_id}")
        now = self._clock()
        interval = client.subscription.interval_ms / 1000
        if (not terminating and client.last_push is not None
                and now - client.last_push < interval / 2):
            return ErrorCode.throttling_quota_exceeded, (
                f"Request from the client [{instance_id}] arrived before the next push "
                "interval time")
        if compression and compression not in ACCEPTED_COMPRESSION:
            return ErrorCode.unsupported_compression_type, (
                f"Unknown compression type {compression}")
        if len(payload) > max_bytes:
            return ErrorCode.telemetry_too_large, (
                f"Telemetry request from [{instance_id}] is larger than the maximum allowed "
                f"size [{max_bytes}]")
        try:
            data = bytes(decompress(compression, payload)) if compression else bytes(payload)
            points = decode_metrics(data)
        except (ValueError, CorruptMessage, UnsupportedCompressionType) as e:
            return ErrorCode.invalid_record, f"Error decoding telemetry payload: {e}"
        values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        base = (("client_instance_id", str(instance_id)),
                ("client_id", client.attributes.get("client_id", "")))
        for p in points:
            suffix = {"histogram_count": "_count", "histogram_sum": "_sum"}.get(p.kind, "")
            labels = base + tuple((_prom_name(k), v) for k, v in p.labels
                                  if k not in ("client_instance_id", "client_id"))
            values[(_prom_name(p.metric) + suffix, labels)] = p.value
        with self._lock:
            if terminating:
                self._clients.pop(instance_id, None)
            else:
                client.last_push = client.seen = now
                client.values.update(values)
        return ErrorCode.none, None

    def _expire(self) -> None:
        now = self._clock()
        if now - self._expired_at < 1.0:
            return  # a sweep is O(clients): at most one a second
        self._expired_at = now
        with self._lock:
            for instance_id, c in list(self._clients.items()):
                # a client asks again at its interval at the latest, even when told to
                # push nothing: three missed intervals and it is gone
                if now - c.seen > 3 * c.subscription.interval_ms / 1000:
                    del self._clients[instance_id]

    def collect(self) -> Iterator[Metric]:
        self._expire()
        with self._lock:
            rows = [(name, labels, value) for c in self._clients.values()
                    for (name, labels), value in c.values.items()]
        families: dict[str, Metric] = {}
        for name, labels, value in sorted(rows):
            family = families.get(name)
            if family is None:
                family = families[name] = Metric(name, "client telemetry (KIP-714)", "gauge")
            family.add_sample(name, dict(labels), value)
        yield from families.values()
