"""The console's background sampler: asks the cluster every few seconds and keeps the
last view plus a rolling history (the charts' data) in memory.

Pages render from the last view, so a page of 1,000 partitions costs a render, not a
round of Admin calls; a broker that goes away shows as the sampler's error line and as
alarms, and the pages keep working from what was last seen.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import ConfigResource, ConfigSource

from odradek.client.health import Alarm, ClusterView, Collector, GroupView, Thresholds, assess
from odradek.console.admin import error_text
from odradek.console.settings import ConsoleSettings

log = logging.getLogger(__name__)

METRICS_PORT_CONFIG = "metrics.port"  # odradek's broker config naming its /metrics port
BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"
DISCOVER_EVERY_S = 60.0
TOPIC_CONFIGS_EVERY_S = 30.0  # topics' configs change rarely (or through us): this pace


class History:
    """Named series of (unix time, value), each trimmed to the last `span_s` seconds."""

    def __init__(self, span_s: float) -> None:
        self.span_s = span_s
        self._series: dict[str, deque[tuple[float, float]]] = {}
        self._lock = threading.Lock()

    def add(self, name: str, when: float, value: float) -> None:
        with self._lock:
            series = self._series.setdefault(name, deque())
            series.append((when, value))
            while series and series[0][0] < when - self.span_s:
                series.popleft()

    def get(self, name: str) -> list[tuple[float, float]]:
        with self._lock:
            return list(self._series.get(name, ()))

    def names(self, prefix: str) -> list[str]:
        with self._lock:
            return sorted(n for n in self._series if n.startswith(prefix))

    def forget(self, keep: set[str], prefix: str) -> None:
        with self._lock:
            for name in [n for n in self._series if n.startswith(prefix) and n not in keep]:
                del self._series[name]


@dataclass
class Rates:
    """Bytes in/out per second and where they came from."""

    bytes_in: float | None = None
    bytes_out: float | None = None
    source: str = "none"  # "metrics" (Prometheus endpoints) or "log sizes" or "none"
    endpoints: list[str] = field(default_factory=list)


def scrape_totals(url: str, timeout: float) -> tuple[float, float]:
    """(bytes in, bytes out) counters of one Prometheus endpoint."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=timeout) as response:
        text = response.read().decode("utf-8", "replace")
    totals = {BYTES_IN: 0.0, BYTES_OUT: 0.0}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in totals:
                totals[s.name] += s.value
    return totals[BYTES_IN], totals[BYTES_OUT]


class Sampler:
    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self.collector = Collector(settings.kafka_config(), window=10,
                                   timeout=settings.timeout_s)
        self.history = History(settings.history_s)
        self.view: ClusterView | None = None
        self.alarms: list[Alarm] = []
        self.rates = Rates()
        self.error: str | None = None  # the last round's failure, shown on every page
        self.updated = 0.0
        self.rounds = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._changed = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._groups: list[GroupView] = []
        self._endpoints: list[str] = []
        self._discovered_at = 0.0
        self.min_isr: dict[str, int] = {}  # topic → min.insync.replicas
        self.overrides: dict[str, list[str]] = {}  # topic → configs set on the topic itself
        self._min_isr_at = 0.0
        self._last_totals: tuple[float, float, float, str] | None = None  # t, in, out, source

    # ---- life --------------------------------------------------------------------

    def start(self) -> None:
        # Two loops: the cluster's state (Metadata, DescribeLogDirs: fast even with a
        # broker down) must not wait behind the groups' and the configs' calls, which
        # wait out their timeout for a broker that went away.
        self._threads = [
            threading.Thread(target=self._loop, args=(self.sample_cluster,), daemon=True,
                             name="console-sampler-cluster"),
            threading.Thread(target=self._loop, args=(self.sample_slow,), daemon=True,
                             name="console-sampler-groups")]
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for t in self._threads:
            t.join(self.settings.timeout_s + 5)

    def refresh_soon(self) -> None:
        """After a mutation: sample now rather than at the next tick."""
        self._min_isr_at = 0.0  # and the topics' configs too
        self._wake.set()

    def wait_for_round(self, after: int, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self.rounds > after, timeout)

    def _loop(self, step: Callable[[], None]) -> None:
        while not self._stop.is_set():
            step()
            self._wake.wait(self.settings.refresh_s)
            self._wake.clear()

    # ---- rounds ------------------------------------------------------------------

    def sample_once(self) -> None:
        self.sample_slow()
        self.sample_cluster()

    def sample_cluster(self) -> None:
        c = self.collector
        try:
            cluster_id, controller, brokers, partitions = c.cluster()
            # on a secured cluster log dirs would read as unreachable: left unknown instead
            dirs = [] if self.settings.secured else c.log_dirs(brokers)
            view = ClusterView(cluster_id, controller, brokers, partitions, dirs, self._groups)
            now = time.time()
            h = self.history
            h.add("partitions.under_replicated", now, sum(
                1 for p in view.partitions if not p.offline and len(p.isr) < len(p.replicas)))
            h.add("partitions.offline", now, sum(p.offline for p in view.partitions))
            self.view, self.alarms, self.error = view, assess(view, Thresholds()), None
            self.updated = now
        except Exception as e:  # the cluster did not answer: keep the last view, say so
            self.error = f"the cluster did not answer at {time.strftime('%H:%M:%S')}: " \
                         f"{error_text(e)}"
            log.debug("sample failed", exc_info=True)
        with self._changed:
            self.rounds += 1
            self._changed.notify_all()

    def sample_slow(self) -> None:
        """Groups' lag, throughput and topics' min.insync.replicas."""
        try:
            self.collector.sample_groups()
            groups = self.collector.groups()
            now = time.time()
            keep = set()
            for g in groups:
                keep.add(f"lag.{g.group}")
                self.history.add(f"lag.{g.group}", now, g.total_lag)
            self.history.forget(keep, "lag.")
            self._groups = groups
            view = self.view
            if view is None:
                return
            self._record_rates(view, now)
            if now - self._min_isr_at > TOPIC_CONFIGS_EVERY_S or \
                    any(p.topic not in self.min_isr for p in view.partitions):
                self._refresh_topic_configs({p.topic for p in view.partitions})
                self._min_isr_at = now
        except Exception:  # shown through the cluster round's error; try again next tick
            log.debug("group sample failed", exc_info=True)

    def under_min_isr(self) -> int:
        """Partitions whose ISR is smaller than their topic's min.insync.replicas:
        acks=all producers to them are refused (NOT_ENOUGH_REPLICAS)."""
        view = self.view
        if view is None:
            return 0
        return sum(1 for p in view.partitions
                   if not p.offline and len(p.isr) < self.min_isr.get(p.topic, 1))

    def _refresh_topic_configs(self, topics: set[str]) -> None:
        resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in sorted(topics)]
        if not resources:
            return
        futures = self.collector.admin.describe_configs(
            resources, request_timeout=self.settings.timeout_s)
        found = {}
        overrides = {}
        for resource, future in futures.items():
            try:
                entries = future.result()
            except Exception:  # deleted meanwhile, or not authorized: default 1
                continue
            overrides[resource.name] = sorted(
                name for name, e in entries.items()
                if ConfigSource(e.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG)
            entry = entries.get("min.insync.replicas")
            if entry is not None and entry.value:
                found[resource.name] = int(entry.value)
        self.overrides = overrides
        self.min_isr = {t: found.get(t, 1) for t in topics}

    def _record_rates(self, view: ClusterView, now: float) -> None:
        if now - self._discovered_at > DISCOVER_EVERY_S:
            self._endpoints = list(self._discover(view))
            self._discovered_at = now
        totals: tuple[float, float] | None = None
        source = "none"
        if self._endpoints:
            try:
                pairs = [scrape_totals(u, self.settings.timeout_s) for u in self._endpoints]
                totals = (sum(p[0] for p in pairs), sum(p[1] for p in pairs))
                source = "metrics"
            except OSError:
                self._discovered_at = 0.0  # a broker moved or went away: look again
        if totals is None:  # no endpoint: bytes in from the growth of the logs on disk
            totals = (float(sum(d.size_bytes for d in view.log_dirs)), float("nan"))
            source = "log sizes"
        rates = Rates(source=source, endpoints=list(self._endpoints))
        last = self._last_totals
        if last is not None and now > last[0] and last[3] == source:
            dt = now - last[0]
            rates.bytes_in = max(totals[0] - last[1], 0.0) / dt
            out = (totals[1] - last[2]) / dt
            rates.bytes_out = None if out != out else max(out, 0.0)  # NaN: unknown
            self.history.add("bytes.in", now, rates.bytes_in)
            if rates.bytes_out is not None:
                self.history.add("bytes.out", now, rates.bytes_out)
        self._last_totals = (now, totals[0], totals[1], source)
        self.rates = rates

    def _discover(self, view: ClusterView) -> Iterator[str]:
        """The brokers' Prometheus endpoints, as their own configs name them."""
        resources = [ConfigResource(ConfigResource.Type.BROKER, str(b.node_id))
                     for b in view.brokers]
        if not resources:
            return
        admin = self.collector.admin
        futures = admin.describe_configs(resources, request_timeout=self.settings.timeout_s)
        hosts = {str(b.node_id): b.host for b in view.brokers}
        for resource, future in futures.items():
            try:
                entries: dict[str, Any] = future.result()
            except Exception:  # that broker is down: found at the next discovery
                continue
            entry = entries.get(METRICS_PORT_CONFIG)
            if entry is not None and entry.value and int(entry.value) > 0:
                yield f"http://{hosts[resource.name]}:{int(entry.value)}/metrics"
