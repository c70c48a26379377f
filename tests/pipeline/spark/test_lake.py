"""The lake: topics → Iceberg through the ingest job, exactly once, with schema evolution,
quarantine and the catalog tools. Real Spark, real pyiceberg, a real broker."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from odradek.cli.lake import app as lake_app
from odradek.pipeline.fleet import FleetConfig, FleetSimulator
from odradek.pipeline.ingest import IngestJob, start_ingest
from odradek.pipeline.lake_catalog import (
    CatalogBusyError,
    LakeConfig,
    ensure_table,
    open_catalog,
    recorded_offsets,
    with_retry,
)
from odradek.pipeline.lake_writer import BatchResult
from tests.pipeline.helpers import create_topic, produce, produce_values, topic
from tests.processes import reap_on_exit

TABLE = "iot.events"


def ingest(spark: SparkSession, job: IngestJob) -> list[BatchResult]:
    results: list[BatchResult] = []
    query = start_ingest(spark, job, on_batch=results.append)
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()
    return results


def scan(lake: LakeConfig, name: str = TABLE) -> pa.Table:
    return open_catalog(lake).load_table(name).scan().to_arrow()


def coordinates(t: pa.Table) -> list[tuple[str, int, int]]:
    return sorted(zip(t["_topic"].to_pylist(), t["_partition"].to_pylist(),
                      t["_offset"].to_pylist(), strict=True))


@pytest.fixture
def job(bootstrap: str, lake_dir: Path) -> IngestJob:
    return IngestJob(bootstrap=bootstrap, table=TABLE, lake=LakeConfig.local(lake_dir),
                     checkpoint=lake_dir / "ckpt", topics=[create_topic(bootstrap, topic())],
                     available_now=True)


GOOD = [
    {"device_id": "cam-1", "motion": True, "reading": 3, "meta": {"fw": "1.0"}},
    {"device_id": "door-2", "event": "open", "tags": ["front", "main"]},
    {"device_id": "th-3", "reading": 21, "status": "ok"},
    {"device_id": "th-4", "reading": 22, "status": 7},
]
BAD = [b'{"device_id": "cam-9", "motion": tru', b"\xff\xfe\x00garbage", b"[1, 2, 3]"]


def test_ingest_lands_each_record_once_quarantines_bad_ones_and_fills_the_catalog(
        spark: SparkSession, job: IngestJob) -> None:
    name = job.topics[0]
    values = [json.dumps(g).encode() for g in GOOD] + BAD
    produce(job.bootstrap, name, [{"value": v, "key": f"k{i}".encode(), "partition": i % 2}
                                  for i, v in enumerate(values)])
    ingest(spark, job)

    table = scan(job.lake)
    assert table.num_rows == len(GOOD)
    assert len(set(coordinates(table))) == len(GOOD)
    by_device = {r["device_id"]: r for r in table.to_pylist()}
    assert by_device["cam-1"]["meta"] == {"fw": "1.0"} and by_device["cam-1"]["motion"] is True
    assert by_device["door-2"]["tags"] == ["front", "main"]
    assert by_device["th-3"]["reading"] == 3 or by_device["th-3"]["reading"] == 21
    assert {by_device["th-3"]["status"], by_device["th-4"]["status"]} == {"ok", "7"}
    schema = open_catalog(job.lake).load_table(TABLE).schema()
    assert str(schema.find_field("reading").field_type) == "long"
    assert str(schema.find_field("status").field_type) == "string"  # mixed → string

    quarantine = scan(job.lake, TABLE + "__quarantine").to_pylist()
    assert sorted(q["raw"] for q in quarantine) == sorted(BAD)
    errors = {q["raw"]: q["error"] for q in quarantine}
    assert errors[BAD[0]].startswith("malformed JSON")
    assert errors[BAD[1]].startswith("not UTF-8")
    assert errors[BAD[2]] == "not a JSON object but a list"
    assert all(q["_topic"] == name and q["_offset"] is not None for q in quarantine)
    # Every source offset is accounted for: in the table or in the quarantine.
    assert len(quarantine) + table.num_rows == len(values)
    assert recorded_offsets(open_catalog(job.lake).load_table(TABLE)) == {
        (name, 0): 4, (name, 1): 3}

    runner = CliRunner()
    lake_args = ["--catalog-uri", job.lake.catalog_uri, "--warehouse", job.lake.warehouse]
    described = runner.invoke(lake_app, ["describe", TABLE, "--json", *lake_args])
    assert described.exit_code == 0, described.output
    d = json.loads(described.output)
    assert d["rows"] == len(GOOD) and d["offsets"] == {name: {"0": 4, "1": 3}}
    assert [c["column"] for c in d["conflicts"]] == ["status"]
    assert any(p["partition"].startswith(f"_topic={name}") for p in d["partitions"])
    assert "_day = day(_timestamp)" in d["partition_spec"]
    history = runner.invoke(lake_app, ["history", TABLE, *lake_args])
    assert history.exit_code == 0 and '"0": 4' in history.output
    found = runner.invoke(lake_app, ["search", "devic", *lake_args])
    assert "device_id" in found.output and TABLE in found.output
    tables = runner.invoke(lake_app, ["tables", *lake_args])
    assert TABLE in tables.output and "quarantine" in tables.output


def test_schema_evolves_across_the_fleets_firmware_update(
        spark: SparkSession, job: IngestJob) -> None:
    name = job.topics[0]
    sim = FleetSimulator(FleetConfig(firmware_update_after=300, malformed_share=0.01,
                                     start_ms=1_700_000_000_000, step_ms=1_000))
    before = list(sim.records(300))
    after = list(sim.records(300))

    def send(recs: list[Any]) -> None:
        produce(job.bootstrap, name, [{"value": r.value, "key": r.key,
                                       "timestamp": r.timestamp_ms} for r in recs])

    send(before)
    job.max_offsets_per_trigger = 150  # two batches or more a run
    first = ingest(spark, job)
    schema = open_catalog(job.lake).load_table(TABLE).schema()
    assert str(schema.find_field("temperature").field_type) == "long"
    assert "signal_dbm" not in [f.name for f in schema.fields]
    # Every batch, the new table's first among them, is parsed and written in its tasks
    # (the Arrow lane): no Spark inference pass, no rewrite.
    assert len(first) >= 2
    assert all("lane" in r.timings and "infer" not in r.timings and "rewrite" not in r.timings
               for r in first)

    send(after)
    second = ingest(spark, job)
    # a new field and a conflicting type: the lane hands the batch to the Spark path, whose
    # one-pass load is redone with the batch's plan
    assert "lane" in second[0].timings and "rewrite" in second[0].timings
    assert second[0].evolved
    loaded = open_catalog(job.lake).load_table(TABLE)
    fields = {f.name: str(f.field_type) for f in loaded.schema().fields}
    assert fields["signal_dbm"] == "long"  # the added field
    assert fields["temperature"] == "long"  # old data keeps its type …
    assert fields["temperature__string"] == "string"  # … the new floats are kept as text
    [conflict] = [c for c in json.loads(loaded.properties["odradek.conflicts"])
                  if c["column"] == "temperature"]
    assert (conflict["table_type"], conflict["seen_type"]) == ("long", "double")

    rows = loaded.scan().to_arrow().to_pylist()
    good = [r for r in before + after if not r.malformed]
    assert len(rows) == len(good)
    assert len({(r["_partition"], r["_offset"]) for r in rows}) == len(good)
    climate_v2 = [r for r in rows if r["type"] == "climate" and r["firmware"] == "2.0.0"]
    sent = {json.loads(r.value)["device_id"] + "@" + str(r.timestamp_ms):
            json.loads(r.value).get("temperature") for r in after if not r.malformed}
    assert climate_v2
    for r in climate_v2:
        original = sent[f"{r['device_id']}@{int(r['_timestamp'].timestamp() * 1000)}"]
        assert r["temperature"] is None and float(r["temperature__string"]) == original
    assert len(scan(job.lake, TABLE + "__quarantine")) == sum(r.malformed for r in before + after)
    # The day partition is the event day, from the records' own timestamps.
    days = {r["_timestamp"].date().isoformat() for r in rows}
    assert days == {"2023-11-14"}


def test_replayed_batch_and_lost_checkpoint_never_write_twice(
        spark: SparkSession, job: IngestJob) -> None:
    name = job.topics[0]
    produce_values(job.bootstrap, name, [json.dumps({"n": i}) for i in range(20)])
    first = ingest(spark, job)
    assert sum(r.rows for r in first) == 20

    # Crash after the lake commit but before Spark's: Spark replays the batch.
    last = max(int(p.name) for p in (job.checkpoint / "commits").iterdir() if p.name.isdigit())
    (job.checkpoint / "commits" / str(last)).unlink()
    (job.checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    produce_values(job.bootstrap, name, [json.dumps({"n": i}) for i in range(20, 30)])
    replay = ingest(spark, job)
    assert [r.skipped for r in replay][:1] == [True]
    assert sorted(scan(job.lake)["n"].to_pylist()) == list(range(30))

    # The checkpoint is gone altogether: the table's own offsets say where to resume.
    shutil.rmtree(job.checkpoint)
    produce_values(job.bootstrap, name, [json.dumps({"n": i}) for i in range(30, 35)])
    resumed = ingest(spark, job)
    assert sum(r.rows for r in resumed) == 5
    assert sorted(scan(job.lake)["n"].to_pylist()) == list(range(35))


def test_query_stopped_mid_stream_and_restarted_lands_everything_once(
        spark: SparkSession, job: IngestJob) -> None:
    import time

    name = job.topics[0]
    produce_values(job.bootstrap, name, [json.dumps({"n": i}) for i in range(200)])
    job.available_now = False
    job.trigger_interval = "200 milliseconds"
    job.max_offsets_per_trigger = 40
    seen: list[BatchResult] = []
    query = start_ingest(spark, job, on_batch=seen.append)
    deadline = time.monotonic() + 120
    while not seen and time.monotonic() < deadline:
        time.sleep(0.2)
    query.stop()
    assert seen and sum(r.rows for r in seen) < 200
    job.available_now = True
    ingest(spark, job)
    assert sorted(scan(job.lake)["n"].to_pylist()) == list(range(200))


def test_a_locked_catalog_is_a_clear_error_not_a_half_commit(lake_dir: Path) -> None:
    lake = LakeConfig.local(lake_dir)
    table = ensure_table(open_catalog(lake), "iot.locked")
    db = lake.catalog_uri.removeprefix("sqlite:///")
    holder = sqlite3.connect(db, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(CatalogBusyError, match="locked by another writer"):
            with_retry("set a property",
                       lambda: table.transaction().set_properties(x="1").commit_transaction(),
                       budget_s=1.0)
    finally:
        holder.rollback()
        holder.close()
    assert "x" not in open_catalog(lake).load_table("iot.locked").properties


@pytest.mark.timeout(900)
def test_ingest_process_killed_with_sigkill_then_restarted_lands_everything_once(
        spark: SparkSession, job: IngestJob, lake_dir: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    name = job.topics[0]
    produce_values(job.bootstrap, name, [json.dumps({"n": i}) for i in range(400)])
    checkpoint = lake_dir / "checkpoints" / TABLE
    cmd = [sys.executable, "-m", "odradek.cli.lake", "ingest", "--bootstrap-server",
           job.bootstrap, "--topic", name, "--table", TABLE, "--catalog-uri",
           job.lake.catalog_uri, "--warehouse", job.lake.warehouse,
           "--checkpoint", str(checkpoint), "--max-offsets-per-trigger", "50",
           "--trigger-interval", "300 milliseconds"]
    log = open(lake_dir.parent / "ingest.log", "wb")  # noqa: SIM115 - the child writes it
    child = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    reap_on_exit(child, group=True)  # the driver and its JVM
    try:
        # two Spark jobs at once (xdist) on a busy 2-core machine: batches take seconds
        deadline = time.monotonic() + 400
        reached = False
        while not reached and time.monotonic() < deadline and child.poll() is None:
            with contextlib.suppress(Exception):  # the table does not exist yet
                reached = scan(job.lake).num_rows >= 100
            time.sleep(0.3)
        assert child.poll() is None, (lake_dir.parent / "ingest.log").read_text()[-3000:]
        assert reached, "no 100 rows within 400 s: " + (
            lake_dir.parent / "ingest.log").read_text()[-3000:]
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the driver and its JVM, mid-batch or not
        child.wait(30)
        log.close()
    landed = scan(job.lake).num_rows
    assert 100 <= landed < 400

    job.checkpoint = checkpoint
    ingest(spark, job)
    assert sorted(scan(job.lake)["n"].to_pylist()) == list(range(400))


def test_confluent_framed_avro_values_land_like_json(
        spark: SparkSession, job: IngestJob, tmp_path: Path) -> None:
    fastavro = pytest.importorskip("fastavro")
    import io
    import struct

    schema = {"type": "record", "name": "Reading", "fields": [
        {"name": "device_id", "type": "string"},
        {"name": "temperature", "type": ["null", "double"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}}]}
    path = tmp_path / "reading.avsc"
    path.write_text(json.dumps(schema))
    parsed = fastavro.parse_schema(schema)

    def framed(record: dict[str, Any]) -> bytes:
        body = io.BytesIO()
        fastavro.schemaless_writer(body, parsed, record)
        return b"\x00" + struct.pack(">i", 42) + body.getvalue()

    values = [framed({"device_id": f"th-{i}", "temperature": 20.0 + i, "tags": ["a"]})
              for i in range(5)] + [b"\x00\x00\x00\x00\x2a\xff", b"plain json?"]
    produce_values(job.bootstrap, job.topics[0], values)
    job.avro_schema = path
    ingest(spark, job)
    rows = sorted(scan(job.lake).to_pylist(), key=lambda r: r["device_id"])
    assert [(r["device_id"], r["temperature"], r["tags"]) for r in rows] == [
        (f"th-{i}", 20.0 + i, ["a"]) for i in range(5)]
    errors = sorted(q["error"] for q in scan(job.lake, TABLE + "__quarantine").to_pylist())
    assert errors[0].startswith("not an Avro record") and "wire format" in errors[1]
