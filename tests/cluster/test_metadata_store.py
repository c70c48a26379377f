"""The embedded metadata store (issue 12): a change appends what it changed, a restart
replays the changes over the snapshot, a torn last record is dropped with one line."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from odradek.cluster.controller import Controller
from odradek.cluster.metadata import BrokerInfo
from odradek.cluster.store import METADATA_FILE, METADATA_LOG, FileMetadataStore

ME = BrokerInfo(1, "127.0.0.1", 9092)


def controller(directory: Path) -> Controller:
    return Controller(FileMetadataStore(directory), cluster_id="c1", local_broker=ME,
                      broker_defaults=lambda: {"num.partitions": 1,
                                               "default.replication.factor": 1})


def test_changes_are_appended_and_replayed_at_the_next_start(tmp_path: Path) -> None:
    async def changes() -> None:
        c = controller(tmp_path)
        for i in range(20):
            await c.create_topic(f"t{i}", 3, 1)
        await c.delete_topic("t0")
        await c.set_topic_configs("t1", {"retention.ms": "1000"})
        await c.create_partitions("t2", 5)
        await c.set_broker_configs({"log.retention.ms": "5000"})

    asyncio.run(changes())
    snapshot = (tmp_path / METADATA_FILE).read_bytes()
    # the snapshot was written once, at the first start; the changes went to the log
    assert b"t19" not in snapshot
    assert len((tmp_path / METADATA_LOG).read_text().splitlines()) == 24
    again = controller(tmp_path)
    topics = again.image.topics
    assert sorted(topics) == sorted(f"t{i}" for i in range(1, 20))
    assert topics["t1"].configs == {"retention.ms": "1000"}
    assert len(topics["t2"].partitions) == 5
    assert again.image.broker_configs == {"log.retention.ms": "5000"}


def test_a_log_grown_past_the_snapshot_becomes_a_new_snapshot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("odradek.cluster.store.MIN_LOG_BYTES_BEFORE_SNAPSHOT", 2_000)

    async def changes() -> None:
        c = controller(tmp_path)
        for i in range(40):
            await c.create_topic(f"t{i}", 2, 1)

    asyncio.run(changes())
    log_bytes = (tmp_path / METADATA_LOG).stat().st_size if (
        tmp_path / METADATA_LOG).exists() else 0
    snapshot = json.loads((tmp_path / METADATA_FILE).read_bytes())
    assert len(snapshot["topics"]) > 10  # snapshots were taken on the way
    assert log_bytes <= max(2_000, len(json.dumps(snapshot))) + 1_000
    assert len(controller(tmp_path).image.topics) == 40


def test_a_torn_last_record_is_dropped_with_one_line_and_the_rest_loads(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def changes() -> None:
        c = controller(tmp_path)
        await c.create_topic("kept", 1, 1)
        await c.create_topic("also-kept", 1, 1)

    asyncio.run(changes())
    with open(tmp_path / METADATA_LOG, "ab") as f:
        f.write(b'{"topic": "torn", "value": {"na')  # a crash in the middle of an append
    with caplog.at_level(logging.WARNING, logger="odradek.cluster.store"):
        c = controller(tmp_path)
    assert sorted(c.image.topics) == ["also-kept", "kept"]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "cut short by a crash" in warnings[0].getMessage()
    # the tail is gone: the next append starts on a whole line
    caplog.clear()

    async def more() -> None:
        await c.create_topic("after", 1, 1)

    asyncio.run(more())
    with caplog.at_level(logging.WARNING, logger="odradek.cluster.store"):
        assert sorted(controller(tmp_path).image.topics) == ["after", "also-kept", "kept"]
    assert not caplog.records


def test_a_snapshot_written_before_the_log_existed_still_loads(tmp_path: Path) -> None:
    """The format of earlier releases: one indented JSON file, no log."""
    old = {"version": 1, "cluster_id": "c1", "next_producer_id": 0, "broker_configs": {},
           "user_configs": {}, "acls": [],
           "topics": [{"name": "old", "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ", "configs": {},
                       "partitions": [{"partition": 0, "leader": 1, "leader_epoch": 0,
                                       "replicas": [1], "isr": [1]}]}]}
    (tmp_path / METADATA_FILE).write_text(json.dumps(old, indent=1))
    assert list(controller(tmp_path).image.topics) == ["old"]
