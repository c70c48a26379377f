"""A cluster's health as seeds 000 and 003 judge it, read through the Kafka APIs any
cluster answers: Metadata and DescribeCluster (brokers, controller, leaders, ISR),
DescribeLogDirs (disk per log dir), ListGroups, DescribeGroups, OffsetFetch and
ListOffsets (lag). `Collector` asks the cluster; `assess` turns a view into alarms (pure,
the thresholds come from its caller). `odradek health` and the console draw them.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.client.lag import Sample, evaluate_partition, group_status

TIMEOUT_S = 15
LIST_LIMIT = 5  # partitions named per alarm line; the rest are counted


@dataclass(frozen=True)
class BrokerView:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionView:
    topic: str
    partition: int
    leader: int  # -1: offline
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def offline(self) -> bool:
        return self.leader < 0

    @property
    def isr_ratio(self) -> float:
        return len(self.isr) / len(self.replicas) if self.replicas else 1.0


@dataclass(frozen=True)
class LogDirView:
    broker: int
    path: str
    error: str | None  # why the dir is offline (KAFKA_STORAGE_ERROR)
    total_bytes: int  # -1: unknown
    usable_bytes: int
    partitions: int
    size_bytes: int

    @property
    def used_pct(self) -> float | None:
        if self.total_bytes <= 0 or self.usable_bytes < 0:
            return None
        return 100.0 * (self.total_bytes - self.usable_bytes) / self.total_bytes


@dataclass(frozen=True)
class GroupView:
    group: str
    state: str
    members: int
    total_lag: int
    max_lag: int
    status: str  # Burrow's: OK, WARN, ERR
    partitions: tuple[tuple[str, int, int | None, str], ...]  # topic, partition, lag, status


@dataclass
class ClusterView:
    cluster_id: str | None
    controller: int | None
    brokers: list[BrokerView]
    partitions: list[PartitionView]
    log_dirs: list[LogDirView]
    groups: list[GroupView]
    taken_at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class Thresholds:
    max_lag: int | None = None  # total lag of a group; None: Burrow's status only
    min_isr_ratio: float = 1.0
    max_disk_used_pct: float = 85.0
    max_leader_imbalance_pct: float = 10.0  # Kafka's leader.imbalance.per.broker.percentage


@dataclass(frozen=True)
class Alarm:
    text: str
    fatal: bool = True  # False: a warning, shown in yellow, does not fail the exit code


# ---- assess (pure) ------------------------------------------------------------------

def leader_balance(view: ClusterView) -> dict[int, tuple[int, int, int]]:
    """Per broker: (partitions it leads, partitions it should lead — it is their first,
    preferred replica — and of those, how many another broker leads)."""
    out = {b.node_id: [0, 0, 0] for b in view.brokers}
    for p in view.partitions:
        if p.leader in out:
            out[p.leader][0] += 1
        if p.replicas and p.replicas[0] in out:
            preferred = out[p.replicas[0]]
            preferred[1] += 1
            if p.leader != p.replicas[0]:
                preferred[2] += 1
    return {b: (v[0], v[1], v[2]) for b, v in out.items()}


def _named(parts: Sequence[PartitionView]) -> str:
    names = ", ".join(f"{p.topic}-{p.partition}" for p in parts[:LIST_LIMIT])
    more = len(parts) - LIST_LIMIT
    return names + (f" and {more} more" if more > 0 else "")


def assess(view: ClusterView, limits: Thresholds) -> list[Alarm]:
    alarms: list[Alarm] = []
    if view.controller is None or view.controller < 0:
        alarms.append(Alarm("no active controller: topics and leaders cannot change"))
    offline = [p for p in view.partitions if p.offline]
    if offline:
        alarms.append(Alarm(f"{len(offline)} offline partition(s), no leader — producers and "
                            f"consumers of them are stopped: {_named(offline)}"))
    shrunk = [p for p in view.partitions if not p.offline and p.isr_ratio < limits.min_isr_ratio]
    if shrunk:
        alarms.append(Alarm(f"{len(shrunk)} partition(s) with in-sync/replicas below "
                            f"{limits.min_isr_ratio:g} (ISR shrank): {_named(shrunk)}"))
    for broker, (_, preferred, elsewhere) in sorted(leader_balance(view).items()):
        pct = 100.0 * elsewhere / preferred if preferred else 0.0
        if pct > limits.max_leader_imbalance_pct:
            alarms.append(Alarm(f"broker {broker}: {elsewhere} of the {preferred} partitions "
                                f"it should lead are led elsewhere ({pct:.0f}% > "
                                f"{limits.max_leader_imbalance_pct:g}%): leaders pile up on "
                                "other brokers", fatal=False))
    for d in view.log_dirs:
        if d.error is not None:
            alarms.append(Alarm(f"broker {d.broker}: log dir {d.path} is offline ({d.error})"))
            continue
        used = d.used_pct
        if used is not None and used > limits.max_disk_used_pct:
            alarms.append(Alarm(f"broker {d.broker}: log dir {d.path} is {used:.0f}% full "
                                f"(> {limits.max_disk_used_pct:g}%)"))
    for g in view.groups:
        if limits.max_lag is not None and g.total_lag > limits.max_lag:
            alarms.append(Alarm(f"group {g.group}: lag {g.total_lag} > {limits.max_lag}"))
        if g.status == "ERR":
            bad = sorted({s for *_, s in g.partitions if s not in ("OK", "WARN")})
            alarms.append(Alarm(f"group {g.group}: status ERR ({', '.join(bad)}) — "
                                f"{_status_meaning(bad)}"))
        elif g.status == "WARN":
            alarms.append(Alarm(f"group {g.group}: status WARN — lag grew at every sample, "
                                "the consumers fall behind", fatal=False))
    return alarms


_MEANINGS = {
    "STOP": "no member, offsets not moving",
    "STALL": "members there, offsets not moving",
    "REWIND": "a committed offset went backwards",
    "ERR": "a partition without a committed offset",
}


def _status_meaning(statuses: Iterable[str]) -> str:
    return "; ".join(_MEANINGS.get(s, s) for s in statuses)


# ---- collect (the cluster's APIs) ---------------------------------------------------

class Collector:
    """Asks the cluster; keeps each group partition's last `window` lag samples, so that
    Burrow's evaluation sees offsets move (or not) across refreshes."""

    def __init__(self, config: dict[str, Any], window: int = 10,
                 timeout: float = TIMEOUT_S) -> None:
        """`config`: a confluent-kafka client config (bootstrap.servers, security)."""
        from confluent_kafka.admin import AdminClient

        self.admin = AdminClient(config)
        self.timeout = timeout
        self.window = window
        self.samples: dict[tuple[str, str, int], deque[Sample]] = {}
        self._group_info: dict[str, tuple[str, int]] = {}
        # each partition's largest replica, from the last log_dirs() (the console's sizes)
        self.partition_sizes: dict[tuple[str, int], int] = {}

    def cluster(self) -> tuple[str | None, int | None, list[BrokerView], list[PartitionView]]:
        described = self.admin.describe_cluster(request_timeout=self.timeout).result()
        controller = described.controller.id if described.controller is not None else None
        brokers = [BrokerView(n.id, n.host, n.port, n.rack) for n in described.nodes]
        metadata = self.admin.list_topics(timeout=self.timeout)
        partitions = [
            PartitionView(name, p.id, p.leader, tuple(p.replicas), tuple(p.isrs))
            for name, t in sorted(metadata.topics.items())
            for p in sorted(t.partitions.values(), key=lambda p: p.id)
        ]
        return described.cluster_id, controller, sorted(brokers, key=lambda b: b.node_id), \
            partitions

    def log_dirs(self, brokers: Sequence[BrokerView]) -> list[LogDirView]:
        from odradek.client import raw
        from odradek.protocol.errors import ErrorCode

        out = []
        sizes: dict[tuple[str, int], int] = {}
        for b in brokers:
            try:
                response = raw.request((b.host, b.port), 35, 4, "odradek-health", topics=None)
            except OSError as e:  # that broker is down: an alarm, not the end of the report
                out.append(LogDirView(b.node_id, "(all)", f"broker unreachable: {e}", -1, -1,
                                      0, 0))
                continue
            for r in response.results:
                dir_sizes = []
                for t in r.topics:
                    for p in t.partitions:
                        if p.is_future_key:
                            continue
                        dir_sizes.append(p.partition_size)
                        key = (t.name, p.partition_index)
                        sizes[key] = max(sizes.get(key, 0), p.partition_size)
                error = None if r.error_code == 0 else ErrorCode(r.error_code).name.upper()
                out.append(LogDirView(b.node_id, r.log_dir, error, r.total_bytes,
                                      r.usable_bytes, len(dir_sizes), sum(dir_sizes)))
        self.partition_sizes = sizes
        return out

    def sample_groups(self) -> None:
        """One lag sample of every group: committed offsets against log ends."""
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        listed = self.admin.list_consumer_groups(request_timeout=self.timeout).result()
        ids = sorted(g.group_id for g in listed.valid)
        info: dict[str, tuple[str, int]] = {}
        committed: dict[tuple[str, str, int], int | None] = {}
        if ids:
            described = self.admin.describe_consumer_groups(ids, request_timeout=self.timeout)
            for gid, future in described.items():
                try:
                    d = future.result()
                except Exception:  # KafkaException: e.g. its coordinator is loading
                    continue
                info[gid] = (d.state.name.title(), len(d.members))
                for m in d.members:
                    for tp in m.assignment.topic_partitions if m.assignment else ():
                        committed.setdefault((gid, tp.topic, tp.partition), None)
            for gid in info:  # librdkafka takes one group per OffsetFetch
                try:
                    offsets = self.admin.list_consumer_group_offsets(
                        [ConsumerGroupTopicPartitions(gid)],
                        request_timeout=self.timeout)[gid].result()
                except Exception:  # KafkaException: asked again at the next sample
                    continue
                for tp in offsets.topic_partitions:
                    committed[(gid, tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 \
                        else None
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        wanted = {TopicPartition(t, p): latest for _, t, p in committed}
        ends: dict[tuple[str, int], int] = {}
        if wanted:
            for tp, future in self.admin.list_offsets(
                    wanted, request_timeout=self.timeout).items():
                try:
                    ends[(tp.topic, tp.partition)] = future.result().offset
                except Exception:  # offline or deleted partition: no sample this time
                    continue
        now = time.time()
        for key, offset in committed.items():
            if (key[1], key[2]) not in ends:
                continue
            window = self.samples.setdefault(key, deque(maxlen=self.window))
            window.append(Sample(now, offset, ends.get((key[1], key[2]), 0)))
        for gone in set(self.samples) - set(committed):  # deleted groups and offsets
            del self.samples[gone]
        self._group_info = info

    def groups(self) -> list[GroupView]:
        """Each group judged by lag.py's Burrow rules over the samples so far."""
        by_group: dict[str, list[tuple[str, int, int | None, str]]] = {}
        for (gid, topic, partition), window in sorted(self.samples.items()):
            members = self._group_info.get(gid, ("?", 0))[1]
            status = evaluate_partition(list(window), has_members=members > 0)
            by_group.setdefault(gid, []).append((topic, partition, window[-1].lag, status))
        out = []
        for gid in sorted(set(self._group_info) | set(by_group)):
            rows = by_group.get(gid, [])
            lags = [lag for _, _, lag, _ in rows if lag is not None]
            state, members = self._group_info.get(gid, ("?", 0))
            out.append(GroupView(gid, state, members, sum(lags), max(lags, default=0),
                                 group_status([s for *_, s in rows]) if rows else "OK",
                                 tuple(rows)))
        return out

    def view(self) -> ClusterView:
        cluster_id, controller, brokers, partitions = self.cluster()
        return ClusterView(cluster_id, controller, brokers, partitions,
                           self.log_dirs(brokers), self.groups())
