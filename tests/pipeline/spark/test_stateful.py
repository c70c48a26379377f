"""Stateful jobs on Spark: device statistics and word count, into a compacted topic and the
lake, with their state readable from the checkpoint (interactive queries)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, ConfigResource
from pyspark.sql import SparkSession

from odradek.pipeline.fleet import FleetConfig, FleetSimulator
from odradek.pipeline.lake_catalog import LakeConfig, open_catalog
from odradek.pipeline.stateful import (
    StatefulSink,
    device_stats,
    read_state,
    start_stateful,
    word_count_sink,
    word_counts,
)
from tests.pipeline.helpers import create_topic, produce, produce_values, topic


def latest_per_key(spark: SparkSession, bootstrap: str, name: str) -> dict[str, Any]:
    """What a compacted topic means: the last value of each key."""
    rows = spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap) \
        .option("subscribe", name).load().orderBy("offset").collect()
    return {bytes(r.key).decode(): json.loads(bytes(r.value)) for r in rows}


def expected_stats(records: list[Any]) -> dict[tuple[str, int], dict[str, Any]]:
    acc: dict[tuple[str, int], dict[str, Any]] = defaultdict(
        lambda: {"events": 0, "readings": [], "door_opens": 0, "last": 0})
    for r in records:
        if r.malformed:
            continue
        body = json.loads(r.value)
        key = (body["device_id"], r.timestamp_ms // 60_000 * 60_000)
        a = acc[key]
        a["events"] += 1
        a["last"] = max(a["last"], r.timestamp_ms)
        a["door_opens"] += body.get("event") == "open"
        if body["type"] == "climate":
            t = body["temperature"]
            a["readings"].append(t / 10 if body["firmware"].startswith("1.") else t)
        elif body["type"] == "camera":
            a["readings"].append(float(body["confidence"]))
    return acc


def test_device_stats_match_the_fleet_and_land_in_topic_lake_and_state(
        spark: SparkSession, bootstrap: str, tmp_path: Path) -> None:
    prefix = topic("fleet")
    topics = {kind: create_topic(bootstrap, f"{prefix}.{kind}") for kind in
              ("camera", "door", "climate")}
    sim = FleetSimulator(FleetConfig(devices=9, firmware_update_after=600,
                                     start_ms=1_700_000_000_000, step_ms=250))
    records = list(sim.records(1_200))
    by_kind = {"fleet.camera": "camera", "fleet.door": "door", "fleet.climate": "climate"}
    for kind, name in topics.items():
        produce(bootstrap, name, [{"value": r.value, "key": r.key, "timestamp": r.timestamp_ms}
                                  for r in records if by_kind[r.topic] == kind])
    lake = LakeConfig.local(tmp_path / "lake")
    out_topic = f"{prefix}.device-stats"
    sink = StatefulSink(bootstrap, out_topic, lake, "iot.device_stats",
                        ("device_id", "window_start"),
                        ("type", "events", "min_reading", "max_reading", "avg_reading",
                         "last_seen", "door_opens"))
    query = start_stateful(spark, device_stats(spark, bootstrap, rf"{prefix}\..*"), sink,
                           tmp_path / "ckpt", "device-stats-test", available_now=True)
    query.awaitTermination(180)
    assert query.exception() is None

    want = expected_stats(records)
    table = open_catalog(lake).load_table("iot.device_stats").scan().to_arrow().to_pylist()
    got = {(r["device_id"], int(r["window_start"].timestamp() * 1000)): r for r in table}
    assert set(got) == set(want)
    for key, w in want.items():
        g = got[key]
        assert g["events"] == w["events"] and g["door_opens"] == w["door_opens"]
        assert int(g["last_seen"].timestamp() * 1000) == w["last"]
        if w["readings"]:
            assert abs(g["max_reading"] - max(w["readings"])) < 1e-9
            assert abs(g["avg_reading"] - sum(w["readings"]) / len(w["readings"])) < 1e-9
        else:
            assert g["avg_reading"] is None

    topic_view = latest_per_key(spark, bootstrap, out_topic)
    assert len(topic_view) == len(want)
    assert sorted((v["device_id"], v["events"]) for v in topic_view.values()) == sorted(
        (device, w["events"]) for (device, _), w in want.items())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [result] = admin.describe_configs([ConfigResource("topic", out_topic)]).values()
    assert result.result(30)["cleanup.policy"].value == "compact"

    # Interactive query: the live state of one device, from the checkpoint.
    device = records[0].key.decode()
    state = read_state(spark, tmp_path / "ckpt", key=device).collect()
    assert state and all(r.key.device_id == device for r in state)
    changelogs = list((tmp_path / "ckpt" / "state").rglob("*.changelog"))
    assert changelogs, "the RocksDB state store keeps a changelog"


def test_word_count_is_a_compacted_topic_and_a_table(
        spark: SparkSession, bootstrap: str, tmp_path: Path) -> None:
    lines = create_topic(bootstrap, topic("lines"), partitions=2)
    produce_values(bootstrap, lines, ["the quick brown fox", "The lazy dog", "the fox"])
    lake = LakeConfig.local(tmp_path / "lake")
    out = f"{lines}-word-counts"
    ckpt = tmp_path / "wc"

    def run() -> None:
        query = start_stateful(spark, word_counts(spark, bootstrap, lines),
                               word_count_sink(bootstrap, lake, out), ckpt, "wc-test",
                               available_now=True)
        query.awaitTermination(180)
        assert query.exception() is None

    run()
    produce_values(bootstrap, lines, ["a fox again"])
    run()  # the counts go on from the state, not from zero
    counts = {k: int(v["count"]) for k, v in latest_per_key(spark, bootstrap, out).items()}
    assert counts == {"the": 3, "quick": 1, "brown": 1, "fox": 3, "lazy": 1, "dog": 1,
                      "a": 1, "again": 1}
    table = open_catalog(lake).load_table("text.word_counts").scan().to_arrow().to_pylist()
    assert {r["word"]: r["count"] for r in table} == counts
    state = {r.key.word: r.value["count"] for r in read_state(spark, ckpt).collect()}
    assert state == counts
