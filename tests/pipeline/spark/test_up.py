"""`odradek up`'s pipeline: fleet, ingest and device stats running together, then stopped."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from pyspark.sql import SparkSession
from rich.console import Console

from odradek.pipeline.lake_catalog import LakeConfig, open_catalog
from odradek.pipeline.maintenance import table_size
from odradek.pipeline.up import UpOptions, run_up
from tests.registry.conftest import RegistryProcess


@pytest.mark.timeout(600)  # the stop waits for the batch in flight, however slow the machine
def test_up_runs_fleet_ingest_and_stats_together_and_stops_cleanly(
        spark: SparkSession, bootstrap: str, registry: RegistryProcess, tmp_path: Path) -> None:
    out = io.StringIO()
    progress = run_up(bootstrap, tmp_path, rate=400, devices=12, firmware_update_after=2_000,
                      duration_s=25, console=Console(file=out, width=120), spark=spark,
                      options=UpOptions(log_format="json", progress_interval_s=2,
                                        maintain_every=3), registry_url=registry.url)
    assert progress.fleet.sent > 2_000 and progress.fleet.updated
    # the meters' Avro, through the registry: registered (the update's field a second
    # version), sent framed, and ingested into iot.meters, nested, with that column
    client = SchemaRegistryClient({"url": registry.url})
    assert client.get_latest_version("fleet.meter-value").version == 2
    assert progress.fleet.meter_readings > 400
    if progress.meter_rows:  # a busy machine may end the run before the query's batch
        meters = open_catalog(LakeConfig.local(tmp_path / "lake")).load_table("iot.meters")
        readings = meters.scan().to_arrow()
        assert readings.num_rows == progress.meter_rows
        assert readings.schema.field("reading").type.get_field_index("kwh") >= 0
        assert str(readings.schema.field("ts").type).startswith("timestamp")
    assert progress.rows > 0 and progress.batches > 0 and not progress.errors
    assert progress.stats_batches > 0
    assert not [q for q in spark.streams.active]  # every query stopped
    table = open_catalog(LakeConfig.local(tmp_path / "lake")).load_table("iot.events")
    events = table.scan().to_arrow()
    assert events.num_rows == progress.rows  # compaction, if it ran, kept every row
    # an upkeep starts every 3 batches while up runs, and the stop waits for it (the
    # batch in flight when the run ends finishes after the last check: hence 4, not 3);
    # it compacts only partitions with two small files or more (test_maintenance.py)
    if progress.batches > 4:
        assert progress.upkeeps >= 1, progress

    lines = [json.loads(line) for line in out.getvalue().splitlines()]  # JSON lines only
    ticks = [e for e in lines if e["event"] == "progress"]
    assert len(ticks) >= 2
    assert [t["sent"] for t in ticks] == sorted(t["sent"] for t in ticks)
    assert {"sent", "rows", "quarantined", "snapshots", "schema_changes", "type_conflicts",
            "stats_updates", "compactions"} <= set(ticks[-1])
    stopped = lines[-1]
    assert stopped["event"] == "stopped" and stopped["rows"] == progress.rows
    assert stopped["files"] == table_size(table).files
    assert stopped["hint"] == f"odradek lake describe iot.events --data-dir {tmp_path}"
