"""`odradek up`'s pipeline half: the fleet, the lake ingest and the device stats, together.

Given a running broker, start the device fleet (a thread), and on one local Spark session
the ingest query (fleet topics → `iot.events`) and the device-stats query (→ a compacted
topic and `iot.device_stats`); show their progress until Ctrl-C, then stop all cleanly:
the fleet first, then the queries (each finishes its batch), then Spark.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession
from rich.console import Console
from rich.live import Live
from rich.table import Table

from odradek.pipeline.fleet import TOPIC_PATTERN, FleetConfig, FleetStats, ensure_topics, run_fleet
from odradek.pipeline.lake_writer import BatchResult

log = logging.getLogger(__name__)


@dataclass
class Progress:
    started: float = field(default_factory=time.monotonic)
    fleet: FleetStats = field(default_factory=FleetStats)
    batches: int = 0
    rows: int = 0
    quarantined: int = 0
    replays: int = 0
    columns_added: int = 0
    conflicts: list[str] = field(default_factory=list)
    last_batch_s: float = 0.0
    stats_batches: int = 0
    stats_updates: int = 0
    errors: list[str] = field(default_factory=list)

    def on_batch(self, r: BatchResult) -> None:
        if r.skipped:
            self.replays += 1
            return
        self.batches += 1
        self.rows += r.rows
        self.quarantined += r.quarantined
        self.columns_added += int(r.evolved)
        self.last_batch_s = time.monotonic()
        for c in r.conflicts:
            if c.column not in self.conflicts:
                self.conflicts.append(c.column)

    def render(self, data_dir: Path) -> Table:
        elapsed = time.monotonic() - self.started
        t = Table(title=f"odradek pipeline — {elapsed:.0f}s — Ctrl-C stops", show_header=False)
        t.add_column(style="bold")
        t.add_column()
        fw = "2.0.0 (adds signal_dbm, temperature becomes a float)" if self.fleet.updated \
            else "1.4.2"
        t.add_row("fleet", f"{self.fleet.sent} records sent, {self.fleet.malformed} malformed, "
                  f"firmware {fw}")
        t.add_row("lake ingest", f"{self.rows} rows in iot.events, {self.quarantined} "
                  f"quarantined, {self.batches} snapshots, {self.columns_added} schema changes")
        t.add_row("type conflicts", ", ".join(self.conflicts) or "none")
        t.add_row("device stats", f"{self.stats_updates} window updates in {self.stats_batches}"
                  " batches → fleet.device-stats (compacted), iot.device_stats")
        t.add_row("look around", f"odradek lake describe iot.events --data-dir {data_dir}")
        if self.errors:
            t.add_row("[red]error[/red]", self.errors[-1])
        return t


def run_up(bootstrap: str, data_dir: Path, rate: float = 200.0, devices: int = 30,
           firmware_update_after: int = 3_000, duration_s: float | None = None,
           console: Console | None = None, spark: SparkSession | None = None) -> Progress:
    """Run fleet + ingest + device stats until Ctrl-C (or `duration_s`); return the totals.

    With `spark` given, run on that session and leave it running afterwards.
    """
    from odradek.pipeline.ingest import IngestJob, start_ingest
    from odradek.pipeline.lake_catalog import LakeConfig
    from odradek.pipeline.session import build_session, plain_ctrl_c, stop_gracefully
    from odradek.pipeline.stateful import device_stats, device_stats_sink, start_stateful

    console = console or Console()
    data_dir = data_dir.resolve()
    lake = LakeConfig.local(data_dir / "lake")
    progress = Progress()
    stop = threading.Event()
    ensure_topics(bootstrap)

    def fleet_main() -> None:
        try:
            run_fleet(bootstrap, FleetConfig(devices=devices, rate=rate,
                                             firmware_update_after=firmware_update_after),
                      stop, stats=progress.fleet)
        except Exception as e:  # shown on screen; the queries go on with what arrived
            progress.errors.append(f"fleet: {e}")

    console.print("starting Spark (local[2]); the first batch takes a few seconds…")
    own_session = spark is None
    if spark is None:
        spark = build_session(app_name="odradek-up", warehouse=data_dir)
    fleet = threading.Thread(target=fleet_main, name="fleet", daemon=True)
    fleet.start()
    ingest = start_ingest(spark, IngestJob(
        bootstrap=bootstrap, table="iot.events", lake=lake,
        checkpoint=data_dir / "checkpoints" / "iot.events", topic_pattern=TOPIC_PATTERN,
        trigger_interval="2 seconds"), on_batch=progress.on_batch)
    sink = device_stats_sink(bootstrap, lake)
    stats = start_stateful(spark, device_stats(spark, bootstrap, TOPIC_PATTERN), sink,
                           data_dir / "checkpoints" / "device-stats", "device-stats",
                           interval="5 seconds")
    queries = [ingest, stats]
    deadline = None if duration_s is None else time.monotonic() + duration_s
    try:
        with plain_ctrl_c(), Live(progress.render(data_dir), console=console,
                                  refresh_per_second=2) as live:
            while deadline is None or time.monotonic() < deadline:
                progress.stats_batches, progress.stats_updates = sink.batches, sink.updates
                for q in queries:
                    if not q.isActive and q.exception() is not None:
                        progress.errors.append(f"{q.name}: {str(q.exception()).splitlines()[0]}")
                        raise RuntimeError(progress.errors[-1])
                live.update(progress.render(data_dir))
                time.sleep(0.5)
    except KeyboardInterrupt:
        console.print("stopping: fleet, then the queries, then Spark…")
    finally:
        stop.set()
        fleet.join(10)
        for q in queries:
            stop_gracefully(q)
        progress.stats_batches, progress.stats_updates = sink.batches, sink.updates
        if own_session:
            spark.stop()
    console.print(f"stopped: {progress.fleet.sent} sent, {progress.rows} rows in the lake, "
                  f"{progress.quarantined} quarantined.")
    return progress
