"""BrokerMetrics without a broker: what a single broker cannot show (shrunk ISRs, offline
partitions, leaders away from their preferred replica) from made-up metadata."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from odradek.cluster.metadata import BrokerInfo, MetadataImage, PartitionInfo, TopicInfo
from odradek.server.metrics import BrokerMetrics, request_label
from odradek.storage.log_config import LogConfig


def scrape(m: BrokerMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    from prometheus_client import generate_latest

    text = generate_latest(m.registry).decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def image(*topics: TopicInfo, brokers: tuple[int, ...] = (1, 2, 3)) -> MetadataImage:
    return MetadataImage("c", 1, {b: BrokerInfo(b, "h", 9092 + b) for b in brokers},
                         {t.name: t for t in topics})


def topic(name: str, *partitions: PartitionInfo) -> TopicInfo:
    return TopicInfo(name, uuid.uuid4(), partitions)


def part(index: int, leader: int, replicas: tuple[int, ...], isr: tuple[int, ...]
         ) -> PartitionInfo:
    return PartitionInfo(index, leader, 0, replicas, isr)


@dataclass
class FakeLog:
    offline: bool = False
    size_in_bytes: int = 100
    log_end_offset: int = 10
    log_start_offset: int = 0
    segments: tuple[Any, ...] = (object(),)
    config: LogConfig = field(default_factory=lambda: LogConfig(min_insync_replicas=2))


def fake_broker(img: MetadataImage, logs: dict[tuple[str, int], FakeLog], tmp: Path) -> Any:
    hosted = {tp: SimpleNamespace(log=lg, high_watermark=lg.log_end_offset)
              for tp, lg in logs.items()}
    return SimpleNamespace(
        node_id=1, replicas=SimpleNamespace(partitions=hosted),
        controller=SimpleNamespace(image=img),
        logs=SimpleNamespace(log_dirs=[tmp, tmp / "dead"], offline_dirs={tmp / "dead": "EIO"}),
        groups=SimpleNamespace(list_groups=lambda: []))


def test_refresh_counts_under_replicated_offline_and_imbalanced_partitions(
        tmp_path: Path) -> None:
    img = image(topic(
        "t",
        part(0, 1, (1, 2, 3), (1, 2, 3)),  # healthy, led here
        part(1, 1, (1, 2, 3), (1,)),  # led here, ISR shrank below min.insync.replicas=2
        part(2, 1, (2, 1, 3), (1, 2)),  # led here though 2 is preferred; under-replicated
        part(3, -1, (1, 2, 3), ()),  # no leader: offline
        part(4, 7, (7,), (7,)),  # leader is no live broker: offline
        part(5, 1, (1,), (1,)),  # its log dir died: offline
    ))
    logs = {("t", i): FakeLog() for i in (0, 1, 2, 3)}
    logs[("t", 5)] = FakeLog(offline=True)
    m = BrokerMetrics()
    m.refresh(fake_broker(img, logs, tmp_path))
    s = scrape(m)
    assert s[("kafka_server_replicamanager_underreplicatedpartitions", frozenset())] == 2
    assert s[("kafka_server_replicamanager_underminisrpartitioncount", frozenset())] == 1
    assert s[("kafka_controller_kafkacontroller_offlinepartitionscount", frozenset())] == 3
    assert s[("kafka_controller_kafkacontroller_preferredreplicaimbalancecount",
              frozenset())] == 1
    assert s[("kafka_server_replicamanager_leadercount", frozenset())] == 3
    assert s[("kafka_server_replicamanager_offlinereplicacount", frozenset())] == 1
    assert s[("kafka_log_logmanager_offlinelogdirectorycount", frozenset())] == 1
    assert s[("kafka_cluster_partition_underreplicated",
              frozenset({("topic", "t"), ("partition", "1")}))] == 1
    assert ("kafka_log_log_size", frozenset({("topic", "t"), ("partition", "5")})) not in s
    dead = frozenset({("logdirectory", str(tmp_path / "dead"))})
    assert s[("kafka_log_logmanager_logdirectoryoffline", dead)] == 1
    why = frozenset({("logdirectory", str(tmp_path / "dead")), ("reason", "EIO")})
    assert s[("odradek_log_dir_offline_info", why)] == 1, "which dir failed, and why"


def test_isr_shrinks_and_expands_are_counted_on_the_leader() -> None:
    m = BrokerMetrics()
    full = image(topic("t", part(0, 1, (1, 2, 3), (1, 2, 3)), part(1, 2, (2, 1), (2, 1))))
    tid = full.topics["t"].topic_id
    shrunk = image(TopicInfo("t", tid, (part(0, 1, (1, 2, 3), (1, 3)),
                                         part(1, 2, (2, 1), (2,)))))  # led by 2: not ours
    m.on_metadata_change(1, "isr", full, shrunk, "t")
    m.on_metadata_change(1, "isr", shrunk, full, "t")
    m.on_metadata_change(1, "isr", full, shrunk, "t")
    s = scrape(m)
    assert s[("kafka_server_replicamanager_isrshrinks_total", frozenset())] == 2
    assert s[("kafka_server_replicamanager_isrexpands_total", frozenset())] == 1


def test_a_deleted_topic_takes_its_series_with_it() -> None:
    m = BrokerMetrics()
    m.on_produce("gone", 100, 2)
    m.on_produce("kept", 100, 2)
    m.on_metadata_change(1, "deleted", image(), image(), "gone")
    names = {dict(labels).get("topic") for name, labels in scrape(m)
             if name.startswith("kafka_server_brokertopicmetrics_bytesin")}
    assert names == {"kept"}


def test_request_labels_are_kafkas_request_names() -> None:
    assert [request_label(n) for n in ("produce", "api_versions", "offset_commit",
                                       "describe_log_dirs", "init_producer_id")] == [
        "Produce", "ApiVersions", "OffsetCommit", "DescribeLogDirs", "InitProducerId"]
