"""Share groups' metrics (KIP-932, KIP-1103) under Kafka's names, as the JMX exporter
renders them (metrics.py's convention: `kafka_<domain>_<type>_<name>`, lower case, a
meter's "PerSec" dropped, the MBean's tags as labels):

    kafka.server:type=BrokerTopicMetrics,name=TotalShareFetchRequestsPerSec,topic=T
      → kafka_server_brokertopicmetrics_totalsharefetchrequests_total{topic}
      (and Failed…, TotalShareAcknowledgementRequests…, FailedShareAcknowledgement…)
    kafka.server:type=ShareGroupMetrics,name=RecordAcknowledgementsPerSec,ackType=A
      → kafka_server_sharegroupmetrics_recordacknowledgements_total{ackType}
    kafka.server:type=SharePartitionMetrics,name=AcquisitionLockTimeoutPerSec,…
      → kafka_server_sharepartitionmetrics_acquisitionlocktimeout_total{group,topic,
        partition}; InFlightMessageCount likewise (a gauge)
    kafka.server:type=group-coordinator-metrics,name=share-group-count,state=S
      → kafka_server_group_coordinator_metrics_share_group_count{state}
      (group-count,protocol=share → …_group_count{protocol="share"})
    kafka.server:type=share-coordinator-metrics,name=write-latency-avg/-max, write-total
      → kafka_server_share_coordinator_metrics_write_latency (a histogram in ms; its
        _count is write-total)
    kafka.server:type=share-coordinator-metrics,name=last-pruned-offset,topic,partition
      → kafka_server_share_coordinator_metrics_last_pruned_offset{topic,partition}
    kafka.server:type=ShareSessionCache,name=ShareSessionsCount
      → kafka_server_sharesessioncache_sharesessionscount

Kafka has no metric for records acquired or redelivered; they are odradek's own
(`odradek_share_records_acquired_total`, `odradek_share_records_redelivered_total`).

Counters are the share-partitions' plain ints (coordinator/share/stats.py) read at the
scrape; gauges that walk groups and share-partitions are read on the loop by
`refresh` into a snapshot, as metrics.py does for the other gauges.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from odradek.coordinator.share.state import SHARE_STATE_TOPIC
from odradek.coordinator.share.stats import ACK_NAMES, ShareStats

if TYPE_CHECKING:
    from odradek.coordinator.share import ShareGroups

GROUP_STATES = ("Empty", "Stable", "Dead")
# a state write appends to __share_group_state and waits for its ISR: about a produce
WRITE_BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 15000)
PARTITION_LABELS = ["group", "topic", "partition"]


@dataclass
class ShareSnapshot:
    groups_by_state: dict[str, int] = field(default_factory=dict)
    # (group, topic, partition, records in flight)
    in_flight: list[tuple[str, str, int, int]] = field(default_factory=list)
    sessions: int = 0
    # __share_group_state partition → the offset it was pruned to
    last_pruned: dict[int, int] = field(default_factory=dict)


class ShareMetrics(Collector):
    def __init__(self, registry: CollectorRegistry) -> None:
        self.stats: ShareStats | None = None  # the broker's, once its share groups exist
        self.snapshot = ShareSnapshot()
        self.write_latency = Histogram(
            "kafka_server_share_coordinator_metrics_write_latency",
            "Milliseconds of a share-group state write, including the append to "
            "__share_group_state (its count is Kafka's write-total)",
            buckets=WRITE_BUCKETS_MS, registry=registry)
        registry.register(self)

    def watch(self, shares: ShareGroups) -> None:
        """Export these share groups' counters; time their share coordinator's writes."""
        self.stats = shares.partitions.stats
        if shares.state is not None:
            shares.state.on_write_ms = self.write_latency.observe

    def refresh(self, shares: ShareGroups | None) -> None:
        """On the loop: the gauges that walk groups and share-partitions."""
        s = ShareSnapshot(groups_by_state=dict.fromkeys(GROUP_STATES, 0))
        if shares is not None:
            for g in shares.coordinator.list_groups():
                s.groups_by_state[g.state_name] = s.groups_by_state.get(g.state_name, 0) + 1
            for (group, _, index), sp in list(shares.partitions.partitions.items()):
                if sp.initialized:
                    s.in_flight.append((group, sp.topic, index, sp.in_flight()))
            s.sessions = len(shares.partitions.sessions)
            if shares.state is not None:
                s.last_pruned = dict(shares.state.last_pruned)
        self.snapshot = s

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot
        count = GaugeMetricFamily("kafka_server_group_coordinator_metrics_group_count",
                                  "Share groups this broker coordinates",
                                  labels=["protocol"])
        count.add_metric(["share"], sum(snap.groups_by_state.values()))
        yield count
        by_state = GaugeMetricFamily(
            "kafka_server_group_coordinator_metrics_share_group_count",
            "Share groups this broker coordinates, by state", labels=["state"])
        for state, n in snap.groups_by_state.items():
            by_state.add_metric([state], n)
        yield by_state
        in_flight = GaugeMetricFamily(
            "kafka_server_sharepartitionmetrics_inflightmessagecount",
            "Records between the share-partition start and end offsets",
            labels=PARTITION_LABELS)
        for group, topic, index, n in snap.in_flight:
            in_flight.add_metric([group, topic, str(index)], n)
        yield in_flight
        pruned = GaugeMetricFamily(
            "kafka_server_share_coordinator_metrics_last_pruned_offset",
            "The offset a share-group state partition led here was last pruned to",
            labels=["topic", "partition"])
        for p, offset in sorted(snap.last_pruned.items()):
            pruned.add_metric([SHARE_STATE_TOPIC, str(p)], offset)
        yield pruned
        yield GaugeMetricFamily("kafka_server_sharesessioncache_sharesessionscount",
                                "Share sessions open on this broker", value=snap.sessions)
        if self.stats is not None:
            yield from _counters(self.stats)


def _per_topic(name: str, doc: str, counts: dict[str, int]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=["topic"])
    for topic, n in dict(counts).items():  # one copy: the loop may add a topic meanwhile
        family.add_metric([topic], n)
    return family


def _counters(stats: ShareStats) -> Iterator[Metric]:
    base = "kafka_server_brokertopicmetrics_"
    yield _per_topic(base + "totalsharefetchrequests",
                     "Topic-partitions asked for by ShareFetch requests", stats.fetch_requests)
    yield _per_topic(base + "failedsharefetchrequests",
                     "Topic-partitions of ShareFetch requests answered with an error",
                     stats.fetch_failed)
    yield _per_topic(base + "totalshareacknowledgementrequests",
                     "Topic-partitions acknowledged (ShareAcknowledge, or ShareFetch's "
                     "piggy-backed acknowledgements)", stats.ack_requests)
    yield _per_topic(base + "failedshareacknowledgementrequests",
                     "Topic-partition acknowledgements answered with an error",
                     stats.ack_failed)
    acks = CounterMetricFamily("kafka_server_sharegroupmetrics_recordacknowledgements",
                               "Records acknowledged, by acknowledgement type",
                               labels=["ackType"])
    done = dict(stats.acknowledgements)
    for name in ACK_NAMES.values():
        acks.add_metric([name], done.get(name, 0))
    yield acks
    timeouts = CounterMetricFamily(
        "kafka_server_sharepartitionmetrics_acquisitionlocktimeout",
        "Records whose acquisition lock timed out before they were acknowledged",
        labels=PARTITION_LABELS)
    for (group, topic, index), n in dict(stats.lock_timeouts).items():
        timeouts.add_metric([group, topic, str(index)], n)
    yield timeouts
    yield CounterMetricFamily("odradek_share_records_acquired",
                              "Records acquired by share consumers", value=stats.records_acquired)
    yield CounterMetricFamily("odradek_share_records_redelivered",
                              "Records acquired again after an earlier delivery",
                              value=stats.records_redelivered)
