"""Prometheus metrics under Kafka's JMX names, as the JMX exporter renders them.

Each broker gets its own registry so that several brokers in one process (tests) do not
collide.

Two kinds, by cost:
- counters bumped where things happen: per request in the connection's dispatch
  (`on_request` / `on_response` / `on_error`: a clock read, a dict lookup and three
  increments — never per record), per partition append (`on_produce`), and per metadata
  change (ISR shrinks and expands, seen by comparing the old and new image);
- gauges that are state, not events (log sizes and offsets, partition and leader
  counts, under-replicated and offline partitions, log dirs, consumer group lag):
  `refresh(broker)` reads them on the event loop every few seconds into a plain
  snapshot, and the scrape (in the HTTP server's thread) turns the last snapshot into
  metric families. The loop never waits on a scrape, the scrape never reads live
  broker state from another thread, and a deleted topic or group simply is not in
  the next snapshot.

One exception: the memory pool's gauges (`queued.max.request.bytes`, memory_pool.py) are
read at the scrape, as Kafka's SocketServer gauges read its pool. The pool changes with
every frame, so a snapshot every few seconds would miss what a scrape is for (a pool
filling up), and reading it is one int attribute (atomic under the GIL), not a walk over
broker state.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import api_name
from odradek.server.replies import CLOSE_CONNECTION
from odradek.server.share_metrics import ShareMetrics
from odradek.server.telemetry import ClientTelemetry

if TYPE_CHECKING:
    from odradek.cluster.metadata import MetadataImage
    from odradek.server.core import BrokerCore
    from odradek.server.memory_pool import MemoryPool

PRODUCE, FETCH = 0, 1
GAUGE_INTERVAL_MS = 5000  # how stale a gauge may be; a refresh is O(partitions + offsets)

# Request times in ms: a produce takes well under 1 ms, a long-poll fetch up to its
# fetch.max.wait.ms (500 by default), a slow consumer group join tens of seconds.
TIME_BUCKETS_MS = (0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000,
                   30000)


def request_label(api_name: str) -> str:
    """kio's 'offset_commit' → Kafka's 'OffsetCommit', the JMX `request` tag."""
    return "".join(part.capitalize() for part in api_name.split("_"))


@dataclass
class Snapshot:
    """The gauges at one refresh, as plain values (built on the loop, read by a scrape)."""

    plain: dict[str, float] = field(default_factory=dict)
    # (topic, partition, size bytes, log end offset, log start offset, segments)
    logs: list[tuple[str, int, int, int, int, int]] = field(default_factory=list)
    under_replicated: list[tuple[str, int]] = field(default_factory=list)
    under_min_isr: list[tuple[str, int]] = field(default_factory=list)
    # (log dir, offline, total bytes, usable bytes)
    log_dirs: list[tuple[str, bool, int, int]] = field(default_factory=list)
    # (log dir, why it is offline)
    offline_reasons: list[tuple[str, str]] = field(default_factory=list)
    # (group, topic, partition, committed offset, lag)
    group_offsets: list[tuple[str, str, int, int, int]] = field(default_factory=list)
    group_members: list[tuple[str, int]] = field(default_factory=list)


_PLAIN_HELP = {
    "kafka_server_replicamanager_leadercount": "Partitions this broker leads",
    "kafka_server_replicamanager_underminisrpartitioncount":
        "Led partitions with fewer in-sync replicas than min.insync.replicas "
        "(acks=all writes fail)",
    "kafka_server_replicamanager_offlinereplicacount":
        "Partitions whose local replica is on an offline log dir",
    "kafka_controller_kafkacontroller_activecontrollercount":
        "1 on the broker that is the controller; the cluster's sum must be 1",
    "kafka_controller_kafkacontroller_offlinepartitionscount":
        "Partitions without a live leader (controller only)",
    "kafka_controller_kafkacontroller_globalpartitioncount":
        "Partitions in the cluster (controller only)",
    "kafka_controller_kafkacontroller_globaltopiccount": "Topics in the cluster (controller only)",
    "kafka_controller_kafkacontroller_preferredreplicaimbalancecount":
        "Partitions not led by their preferred (first) replica (controller only)",
    "kafka_log_logmanager_offlinelogdirectorycount": "Log dirs that failed and are offline",
    "odradek_partitions_unopened":
        "Partitions hosted here whose log could not be opened (offline; see the log)",
    "odradek_file_descriptor_refusals":
        "Connections shed and opens refused for want of file descriptors since start",
}


class _SnapshotCollector(Collector):
    def __init__(self) -> None:
        self.snapshot = Snapshot()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        s = self.snapshot  # one reference read: the loop swaps in whole snapshots
        for name, value in s.plain.items():
            yield GaugeMetricFamily(name, _PLAIN_HELP.get(name, name), value=value)
        yield from _log_families(s)
        yield from _group_families(s)


# Kafka's MemoryPool.NONE answers Long.MAX_VALUE as its available memory
UNBOUNDED_AVAILABLE = float(2**63 - 1)


class _MemoryPoolCollector(Collector):
    """kafka.network:type=SocketServer,name=MemoryPoolAvailable / MemoryPoolUsed."""

    def __init__(self, pool: MemoryPool) -> None:
        self.pool = pool

    def collect(self) -> Iterator[GaugeMetricFamily]:
        pool = self.pool
        used = pool.used  # one read: both gauges describe the same moment
        available = pool.capacity - used if pool.bounded else UNBOUNDED_AVAILABLE
        yield GaugeMetricFamily(
            "kafka_network_socketserver_memorypoolavailable",
            "Bytes of queued.max.request.bytes not held by requests in flight "
            "(negative: over the bound by responses still in the transport)",
            value=available)
        yield GaugeMetricFamily(
            "kafka_network_socketserver_memorypoolused",
            "Bytes of request frames being read, queued or handled, and of unsent "
            "responses above the transport's high-water mark", value=used)


def _tp_family(name: str, doc: str, rows: list[tuple[str, int]]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=["topic", "partition"])
    for topic, partition in rows:
        family.add_metric([topic, str(partition)], 1)
    return family


def _log_families(s: Snapshot) -> Iterator[GaugeMetricFamily]:
    tp = ["topic", "partition"]
    size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's log", labels=tp)
    end = GaugeMetricFamily("kafka_log_log_logendoffset", "Next offset to be written",
                            labels=tp)
    start = GaugeMetricFamily("kafka_log_log_logstartoffset", "First readable offset",
                              labels=tp)
    segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of the log",
                                 labels=tp)
    for topic, partition, nbytes, leo, lso, nsegments in s.logs:
        labels = [topic, str(partition)]
        size.add_metric(labels, nbytes)
        end.add_metric(labels, leo)
        start.add_metric(labels, lso)
        segments.add_metric(labels, nsegments)
    yield from (size, end, start, segments)
    yield _tp_family("kafka_cluster_partition_underreplicated",
                     "1 for each led partition with fewer in-sync replicas than replicas",
                     s.under_replicated)
    yield _tp_family("kafka_cluster_partition_underminisr",
                     "1 for each led partition with fewer in-sync replicas than "
                     "min.insync.replicas", s.under_min_isr)
    offline = GaugeMetricFamily("kafka_log_logmanager_logdirectoryoffline",
                                "1 when the log dir is offline", labels=["logdirectory"])
    total = GaugeMetricFamily("odradek_log_dir_total_bytes", "Size of the log dir's volume",
                              labels=["logdirectory"])
    usable = GaugeMetricFamily("odradek_log_dir_usable_bytes",
                               "Free bytes on the log dir's volume", labels=["logdirectory"])
    for path, is_offline, total_bytes, usable_bytes in s.log_dirs:
        offline.add_metric([path], 1 if is_offline else 0)
        if not is_offline:
            total.add_metric([path], total_bytes)
            usable.add_metric([path], usable_bytes)
    reasons = GaugeMetricFamily("odradek_log_dir_offline_info",
                                "1 for each failed log dir, with why it failed",
                                labels=["logdirectory", "reason"])
    for path, reason in s.offline_reasons:
        reasons.add_metric([path, reason], 1)
    yield from (offline, total, usable, reasons)


def _group_families(s: Snapshot) -> Iterator[GaugeMetricFamily]:
    labels = ["consumergroup", "topic", "partition"]
    current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                "Committed offset of the group", labels=labels)
    lag = GaugeMetricFamily("kafka_consumergroup_lag",
                            "High watermark minus the group's committed offset", labels=labels)
    sums: dict[tuple[str, str], int] = {}
    for group, topic, partition, offset, behind in s.group_offsets:
        current.add_metric([group, topic, str(partition)], offset)
        lag.add_metric([group, topic, str(partition)], behind)
        sums[(group, topic)] = sums.get((group, topic), 0) + behind
    lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum", "The group's lag on the topic",
                                labels=["consumergroup", "topic"])
    for (group, topic), total in sums.items():
        lag_sum.add_metric([group, topic], total)
    members = GaugeMetricFamily("kafka_consumergroup_members", "Members of the group",
                                labels=["consumergroup"])
    for group, count in s.group_members:
        members.add_metric([group], count)
    yield from (current, lag, lag_sum, members)


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.telemetry = ClientTelemetry()  # what clients push (KIP-714)
        r.register(self.telemetry)
        self.bytes_in = Counter(
            "kafka_server_brokertopicmetrics_bytesin", "Bytes produced to the broker",
            ["topic"], registry=r)
        self.messages_in = Counter(
            "kafka_server_brokertopicmetrics_messagesin", "Records produced to the broker",
            ["topic"], registry=r)
        self.bytes_out = Counter(
            "kafka_server_brokertopicmetrics_bytesout", "Bytes fetched from the broker",
            registry=r)
        self.total_produce = Counter(
            "kafka_server_brokertopicmetrics_totalproducerequests",
            "Partition appends asked for by produce requests", ["topic"], registry=r)
        self.failed_produce = Counter(
            "kafka_server_brokertopicmetrics_failedproducerequests",
            "Partition appends that failed (the produce response's error codes)", ["topic"],
            registry=r)
        self.total_fetch = Counter(
            "kafka_server_brokertopicmetrics_totalfetchrequests", "Fetch requests", registry=r)
        self.failed_fetch = Counter(
            "kafka_server_brokertopicmetrics_failedfetchrequests",
            "Fetch requests that failed as a whole", registry=r)
        self.requests = Counter(
            "kafka_network_requestmetrics_requests", "Requests received, by API",
            ["request"], registry=r)
        self.total_time = Histogram(
            "kafka_network_requestmetrics_totaltimems",
            "Milliseconds from dispatch to response, by API", ["request"],
            buckets=TIME_BUCKETS_MS, registry=r)
        self.errors = Counter(
            "kafka_network_requestmetrics_errors", "Error codes answered, by API and error",
            ["request", "error"], registry=r)
        self.isr_shrinks = Counter(
            "kafka_server_replicamanager_isrshrinks", "Times a led partition's ISR shrank",
            registry=r)
        self.isr_expands = Counter(
            "kafka_server_replicamanager_isrexpands", "Times a led partition's ISR grew",
            registry=r)
        self.partitions = Gauge(
            "kafka_server_replicamanager_partitioncount", "Partitions on this broker",
            registry=r)
        self.under_replicated = Gauge(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions with fewer in-sync replicas than replicas", registry=r)
        self.connections = Gauge(
            "kafka_server_socketservermetrics_connection_count", "Open client connections",
            registry=r)
        self._gauges = _SnapshotCollector()
        r.register(self._gauges)
        self.share = ShareMetrics(r)  # share groups' (server/share_metrics.py)
        # Labelled children, looked up once: `labels()` validates and locks on every call.
        self._by_api: dict[int, tuple[Any, Any, str]] = {}
        self._by_topic: dict[str, tuple[Any, Any, Any]] = {}

    def watch_memory_pool(self, pool: MemoryPool) -> None:
        """Export the broker's `queued.max.request.bytes` pool (read at each scrape)."""
        self.registry.register(_MemoryPoolCollector(pool))

    # ---- per partition append (handlers/produce.py) ---------------------------------

    def _topic(self, topic: str) -> tuple[Any, Any, Any]:
        children = self._by_topic.get(topic)
        if children is None:
            children = self._by_topic[topic] = (
                self.bytes_in.labels(topic), self.messages_in.labels(topic),
                self.total_produce.labels(topic))
        return children

    def on_produce(self, topic: str, nbytes: int, records: int) -> None:
        bytes_in, messages_in, _ = self._topic(topic)
        bytes_in.inc(nbytes)
        messages_in.inc(records)

    def on_fetch(self, nbytes: int) -> None:
        if nbytes:
            self.bytes_out.inc(nbytes)

    # ---- per request (server/connection.py's dispatch) ------------------------------

    def on_request(self, api_key: int) -> float:
        """A request is dispatched; returns the clock to hand to `on_response`."""
        stats = self._by_api.get(api_key)
        if stats is None:
            stats = self._api(api_key)
        stats[0].inc()
        return time.perf_counter()

    def _api(self, api_key: int) -> tuple[Any, Any, str]:
        label = request_label(api_name(api_key))
        stats = self._by_api[api_key] = (self.requests.labels(label),
                                         self.total_time.labels(label), label)
        return stats

    def on_response(self, api_key: int, started: float, request: Any, result: Any) -> None:
        """The response left (or, for acks=0, was not owed)."""
        stats = self._by_api.get(api_key) or self._api(api_key)
        stats[1].observe((time.perf_counter() - started) * 1000.0)
        if api_key == PRODUCE:
            self._produce_outcome(request, result)
        elif api_key == FETCH:
            self.total_fetch.inc()

    def _produce_outcome(self, request: Any, result: Any) -> None:
        topics = getattr(request, "topic_data", ())
        for t in topics:
            self._topic(t.name)[2].inc(len(t.partition_data))
        if result is CLOSE_CONNECTION:
            # acks=0: no per-partition answer, the closed connection says "something failed"
            for t in topics:
                self.failed_produce.labels(t.name).inc(len(t.partition_data))
            self.errors.labels("Produce", "UNKNOWN_SERVER_ERROR").inc()
            return
        for t in getattr(result, "responses", ()):  # absent for acks=0 and Encoded replies
            for p in t.partition_responses:
                if p.error_code:
                    self.failed_produce.labels(t.name).inc()
                    self.errors.labels("Produce", _error_name(p.error_code)).inc()

    def on_error(self, api_key: int, exc: BaseException | None) -> None:
        """The handler failed and the connection is closed."""
        label = (self._by_api.get(api_key) or self._api(api_key))[2]
        code = getattr(exc, "code", None)
        self.errors.labels(label, _error_name(code) if code is not None
                           else "UNKNOWN_SERVER_ERROR").inc()
        if api_key == FETCH:
            self.failed_fetch.inc()

    # ---- per metadata change (the controller's listener) ----------------------------

    def on_metadata_change(self, node_id: int, event: str, old: MetadataImage,
                           new: MetadataImage, topic: str) -> None:
        if event == "deleted":
            self._forget_topic(topic)
            return
        before, after = old.topics.get(topic), new.topics.get(topic)
        if before is None or after is None:
            return
        old_isr = {p.partition: set(p.isr) for p in before.partitions}
        for p in after.partitions:
            was = old_isr.get(p.partition)
            if p.leader != node_id or was is None or was == set(p.isr):
                continue
            if set(p.isr) < was:
                self.isr_shrinks.inc()
            elif set(p.isr) > was:
                self.isr_expands.inc()

    def _forget_topic(self, topic: str) -> None:
        """A deleted topic's series go, as Kafka removes its topic metrics."""
        self._by_topic.pop(topic, None)
        for counter in (self.bytes_in, self.messages_in, self.total_produce,
                        self.failed_produce):
            counter.remove(topic)

    # ---- gauges (every GAUGE_INTERVAL_MS on the broker's loop) ----------------------

    def refresh(self, broker: BrokerCore) -> None:
        """Read the gauges from the broker, read-only, into a new snapshot."""
        s = Snapshot()
        me = broker.node_id
        hosted = broker.replicas.partitions
        offline_replicas = 0
        for (topic, index), p in hosted.items():
            lg = p.log
            if lg.offline:
                offline_replicas += 1
                continue
            s.logs.append((topic, index, lg.size_in_bytes, lg.log_end_offset,
                           lg.log_start_offset, len(lg.segments)))
        image = broker.controller.image
        leaders = urp = offline = imbalance = total = 0
        for info in image.topics.values():
            for pi in info.partitions:
                total += 1
                local = hosted.get((info.name, pi.partition))
                dead = local is not None and local.log.offline
                if pi.leader < 0 or pi.leader not in image.brokers or (pi.leader == me and dead):
                    offline += 1
                    continue
                if pi.replicas and pi.leader != pi.replicas[0]:
                    imbalance += 1
                if pi.leader != me:
                    continue
                leaders += 1
                if len(pi.isr) < len(pi.replicas):
                    urp += 1
                    s.under_replicated.append((info.name, pi.partition))
                if local is not None and len(pi.isr) < local.log.config.min_insync_replicas:
                    s.under_min_isr.append((info.name, pi.partition))
        controller = image.controller_id == me
        s.plain = {
            "kafka_server_replicamanager_leadercount": leaders,
            "kafka_server_replicamanager_underminisrpartitioncount": len(s.under_min_isr),
            "kafka_server_replicamanager_offlinereplicacount": offline_replicas,
            "kafka_controller_kafkacontroller_activecontrollercount": 1 if controller else 0,
            "kafka_controller_kafkacontroller_offlinepartitionscount":
                offline if controller else 0,
            "kafka_controller_kafkacontroller_globalpartitioncount": total if controller else 0,
            "kafka_controller_kafkacontroller_globaltopiccount":
                len(image.topics) if controller else 0,
            "kafka_controller_kafkacontroller_preferredreplicaimbalancecount":
                imbalance if controller else 0,
        }
        self._read_log_dirs(broker, s)
        self._read_groups(broker, s)
        self.share.refresh(getattr(broker, "shares", None))
        self.partitions.set(len(hosted))
        self.under_replicated.set(urp)
        self._gauges.snapshot = s

    @staticmethod
    def _read_log_dirs(broker: BrokerCore, s: Snapshot) -> None:
        logs = broker.logs
        for directory in logs.log_dirs:
            if directory in logs.offline_dirs:
                s.log_dirs.append((str(directory), True, -1, -1))
                s.offline_reasons.append((str(directory), logs.offline_dirs[directory]))
                continue
            try:
                disk = shutil.disk_usage(directory)
            except OSError:
                continue  # the next write there takes the dir offline; not ours to do
            s.log_dirs.append((str(directory), False, disk.total, disk.free))
        s.plain["kafka_log_logmanager_offlinelogdirectorycount"] = len(logs.offline_dirs)
        s.plain["odradek_partitions_unopened"] = len(getattr(logs, "unopened", ()))
        warnings = getattr(logs, "descriptor_warnings", None)
        s.plain["odradek_file_descriptor_refusals"] = warnings.total if warnings else 0

    @staticmethod
    def _read_groups(broker: BrokerCore, s: Snapshot) -> None:
        """Lag as kafka-exporter computes it: high watermark minus committed offset, for
        the groups this broker coordinates and the partitions it hosts."""
        groups = getattr(broker, "groups", None)
        if groups is None:
            return
        hosted = broker.replicas.partitions
        for g in groups.list_groups():
            s.group_members.append((g.group_id, len(getattr(g, "members", ()))))
            for (topic, index), committed in list(g.offsets.items()):
                p = hosted.get((topic, index))
                if p is None or committed.offset < 0:
                    continue
                lag = max(p.high_watermark - committed.offset, 0)
                s.group_offsets.append((g.group_id, topic, index, committed.offset, lag))


def _error_name(code: Any) -> str:
    name = getattr(code, "name", None)
    if name is None:
        try:
            name = ErrorCode(int(code)).name
        except ValueError:
            return str(code)
    return str(name).upper()
