"""`odradek up`'s pipeline: fleet, ingest and device stats running together, then stopped."""

from __future__ import annotations

import io
from pathlib import Path

from pyspark.sql import SparkSession
from rich.console import Console

from odradek.pipeline.lake_catalog import LakeConfig, open_catalog
from odradek.pipeline.up import run_up


def test_up_runs_fleet_ingest_and_stats_together_and_stops_cleanly(
        spark: SparkSession, bootstrap: str, tmp_path: Path) -> None:
    out = io.StringIO()
    progress = run_up(bootstrap, tmp_path, rate=400, devices=12, firmware_update_after=2_000,
                      duration_s=25, console=Console(file=out, width=120), spark=spark)
    assert progress.fleet.sent > 2_000 and progress.fleet.updated
    assert progress.rows > 0 and progress.batches > 0 and not progress.errors
    assert progress.stats_batches > 0
    assert not [q for q in spark.streams.active]  # every query stopped
    catalog = open_catalog(LakeConfig.local(tmp_path / "lake"))
    events = catalog.load_table("iot.events").scan().to_arrow()
    assert events.num_rows == progress.rows
    assert "stopped:" in out.getvalue()
