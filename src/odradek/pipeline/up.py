"""`odradek up`'s pipeline half: the fleet, the lake ingest and the device stats, together.

Given a running broker, start the device fleet (a thread), and on one local Spark session
the ingest query (fleet topics → `iot.events`) and the device-stats query (→ a compacted
topic and `iot.device_stats`); show their progress until Ctrl-C, then stop all cleanly:
the fleet first, then the queries (each finishes its batch), then Spark.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession
from rich.console import Console
from rich.live import Live
from rich.table import Table

from odradek.home import Home
from odradek.pipeline.fleet import TOPIC_PATTERN, FleetConfig, FleetStats, ensure_topics, run_fleet
from odradek.pipeline.fleet_meters import METER_TABLE
from odradek.pipeline.lake_catalog import QUARANTINE_SUFFIX, LakeConfig
from odradek.pipeline.lake_writer import BatchResult
from odradek.pipeline.reporting import Reporter

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)


EVENTS = "iot.events"
SLOW_WORKER = "Python worker failed to connect back"
MAX_RESTARTS = 3


@dataclass
class Progress:
    home: Home | None = None
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
    compactions: int = 0
    compactions_deferred: int = 0  # planned, but an ingest commit kept landing first
    upkeeps: int = 0  # upkeep runs finished (a run may find no partition to compact)
    files_compacted: int = 0
    meter_rows: int = 0  # iot.meters, from the registry's Avro (with a registry)

    def on_meter_batch(self, r: BatchResult) -> None:
        if not r.skipped:
            self.meter_rows += r.rows

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

    def meters(self) -> str:
        """The registry's Avro part of the progress line ("" without a registry)."""
        if not self.fleet.meter_readings:
            return ""
        return (f"registry Avro {self.fleet.meter_readings} meter readings, "
                f"{self.meter_rows} rows in iot.meters; ")

    def hint(self) -> str:
        option = self.home.option() if self.home is not None else ""
        return f"odradek lake describe {EVENTS}{option}"

    def firmware(self) -> str:
        return "2.0.0 (adds signal_dbm, temperature becomes a float)" if self.fleet.updated \
            else "1.4.2"

    def figures(self) -> dict[str, Any]:
        """What the table shows, as numbers (the JSON progress line)."""
        return {"elapsed_s": round(time.monotonic() - self.started),
                "sent": self.fleet.sent, "malformed": self.fleet.malformed,
                "firmware": "2.0.0" if self.fleet.updated else "1.4.2",
                "table": EVENTS, "rows": self.rows, "quarantined": self.quarantined,
                "snapshots": self.batches, "schema_changes": self.columns_added,
                "type_conflicts": list(self.conflicts),
                "stats_updates": self.stats_updates, "stats_batches": self.stats_batches,
                "compactions": self.compactions, "files_compacted": self.files_compacted,
                "meter_readings": self.fleet.meter_readings, "meter_rows": self.meter_rows,
                "errors": self.errors[-1:]}

    def line(self) -> str:
        """The table's figures on one plain line."""
        line = (f"odradek up {time.monotonic() - self.started:.0f}s: fleet {self.fleet.sent} "
                f"sent, {self.fleet.malformed} malformed, firmware {self.firmware()}; lake "
                f"{self.rows} rows in {EVENTS}, {self.quarantined} quarantined, {self.batches} "
                f"snapshots, {self.columns_added} schema changes, type conflicts "
                f"{', '.join(self.conflicts) or 'none'}; {self.meters()}device stats "
                f"{self.stats_updates} "
                f"window updates in {self.stats_batches} batches; {self.compactions} "
                f"compactions")
        if self.errors:
            line += f"; error: {self.errors[-1]}"
        return line

    def render(self, data_dir: Path) -> Table:
        elapsed = time.monotonic() - self.started
        t = Table(title=f"odradek pipeline — {elapsed:.0f}s — Ctrl-C stops", show_header=False)
        t.add_column(style="bold")
        t.add_column()
        fw = self.firmware()
        t.add_row("fleet", f"{self.fleet.sent} records sent, {self.fleet.malformed} malformed, "
                  f"firmware {fw}")
        t.add_row("lake ingest", f"{self.rows} rows in iot.events, {self.quarantined} "
                  f"quarantined, {self.batches} snapshots, {self.columns_added} schema changes")
        t.add_row("type conflicts", ", ".join(self.conflicts) or "none")
        t.add_row("device stats", f"{self.stats_updates} window updates in {self.stats_batches}"
                  " batches → fleet.device-stats (compacted), iot.device_stats")
        if self.fleet.meter_readings:
            t.add_row("registry avro", f"{self.fleet.meter_readings} meter readings → "
                      f"{self.meter_rows} rows in iot.meters")
        t.add_row("lake upkeep", f"{self.compactions} compactions, {self.files_compacted} small "
                  "files merged")
        t.add_row("look around", self.hint())
        if self.errors:
            t.add_row("[red]error[/red]", self.errors[-1])
        return t


@dataclass(frozen=True)
class UpOptions:
    """How `odradek up` reports and looks after its lake."""

    # table: the live table (on a terminal); text: a plain line every interval; json: the
    # same figures as JSON lines; auto: table on a terminal, text otherwise
    log_format: str = "auto"
    progress_interval_s: float = 10.0
    maintain_every: int = 50  # ingest batches between two compactions of iot.events; 0: never
    target_file_bytes: int = 64 * 1024 * 1024
    # Snapshot expiry of every table up writes, as the tables' Iceberg properties
    # history.expire.max-snapshot-age-ms / history.expire.min-snapshots-to-keep. Given,
    # they are written to the tables; None: a table keeps its own, else up's default.
    retain_snapshots_s: float | None = None
    snapshots_kept: int | None = None


# up's expiry when neither the option nor the table says: the newest 100 snapshots and any
# of the last 2 minutes (60 at the 2 s trigger). Every pyiceberg commit copies the table's
# metadata, snapshots included, so an unbounded count makes every batch slower.
UP_RETENTION_S = 120.0
UP_SNAPSHOTS_KEPT = 100
# Files no snapshot needs are deleted only this long after they were written: an ingest's
# Parquet files exist before the commit that adds them, however short the retention.
UP_ORPHAN_AGE = dt.timedelta(hours=1)


def run_up(bootstrap: str, data_dir: Path, rate: float = 200.0, devices: int = 30,
           firmware_update_after: int = 3_000, duration_s: float | None = None,
           console: Console | None = None, spark: SparkSession | None = None,
           options: UpOptions | None = None, registry_url: str | None = None) -> Progress:
    """Run fleet + ingest + device stats until Ctrl-C (or `duration_s`); return the totals.

    `data_dir` is the data home: the lake in its lake/, checkpoints in its checkpoints/.
    With `spark` given, run on that session and leave it running afterwards. With
    `registry_url`, the meters' Avro goes through that registry into `iot.meters`.
    """
    from odradek.pipeline.ingest import IngestJob, start_ingest
    from odradek.pipeline.session import build_session, plain_ctrl_c, stop_gracefully
    from odradek.pipeline.stateful import device_stats, device_stats_sink, start_stateful

    options = options or UpOptions()
    console = console or Console()
    out = Reporter(console, options.log_format)
    data_dir = data_dir.resolve()
    home = Home(data_dir)
    lake = LakeConfig.local(home.lake)
    progress = Progress(home=home)
    stop = threading.Event()
    ensure_topics(bootstrap)

    def fleet_main() -> None:
        try:
            run_fleet(bootstrap, FleetConfig(devices=devices, rate=rate,
                                             firmware_update_after=firmware_update_after),
                      stop, stats=progress.fleet, registry_url=registry_url)
        except Exception as e:  # shown on screen; the queries go on with what arrived
            progress.errors.append(f"fleet: {e}")

    out.say("starting Spark (local[2]); the first batch takes a few seconds…", "starting")
    own_session = spark is None
    if spark is None:
        spark = build_session(app_name="odradek-up", warehouse=data_dir)
    fleet = threading.Thread(target=fleet_main, name="fleet", daemon=True)
    fleet.start()
    session = spark
    sink = device_stats_sink(bootstrap, lake)
    starters: list[Callable[[], StreamingQuery]] = [
        lambda: start_ingest(session, IngestJob(
            bootstrap=bootstrap, table=EVENTS, lake=lake,
            checkpoint=home.checkpoint(EVENTS), topic_pattern=TOPIC_PATTERN,
            trigger_interval="2 seconds"), on_batch=progress.on_batch),
        lambda: start_stateful(session, device_stats(session, bootstrap, TOPIC_PATTERN), sink,
                               home.checkpoint("device-stats"), "device-stats",
                               interval="5 seconds")]
    if registry_url is not None:
        from odradek.pipeline.fleet_meters import METER_TOPIC

        ensure_topics(bootstrap, topics=[METER_TOPIC])
        starters.append(lambda: start_ingest(session, IngestJob(
            bootstrap=bootstrap, table=METER_TABLE, lake=lake,
            checkpoint=home.checkpoint(METER_TABLE), topics=[METER_TOPIC],
            schema_registry=registry_url, trigger_interval="5 seconds"),
            on_batch=progress.on_meter_batch))
    queries = [start() for start in starters]
    restarts = [0] * len(queries)
    keeper = LakeKeeper(lake, options, progress)
    deadline = None if duration_s is None else time.monotonic() + duration_s
    next_report = time.monotonic() + options.progress_interval_s
    live: Live | None = None
    try:
        with plain_ctrl_c(), contextlib.ExitStack() as stack:
            if out.format == "table":
                live = stack.enter_context(Live(progress.render(data_dir), console=console,
                                                refresh_per_second=2))
            while deadline is None or time.monotonic() < deadline:
                progress.stats_batches, progress.stats_updates = sink.batches, sink.updates
                for i, q in enumerate(queries):
                    if not q.isActive and q.exception() is not None:
                        why = str(q.exception()).splitlines()[0]
                        if SLOW_WORKER in why and restarts[i] < MAX_RESTARTS:
                            # Spark gives a new Python worker 10 s to start; on a busy
                            # machine it may need more. The checkpoint makes a restart lose
                            # and repeat nothing.
                            restarts[i] += 1
                            log.warning("%s: %s; restarting it", q.name, why)
                            queries[i] = starters[i]()
                            continue
                        progress.errors.append(f"{q.name}: {why}")
                        raise RuntimeError(progress.errors[-1])
                keeper.maybe_start()
                if live is not None:
                    live.update(progress.render(data_dir))
                elif time.monotonic() >= next_report:
                    next_report += options.progress_interval_s
                    out.progress(progress.figures(), progress.line())
                time.sleep(0.5)
    except KeyboardInterrupt:
        out.say("stopping: fleet, then the queries, then Spark…", "stopping")
    finally:
        stop.set()
        fleet.join(10)
        for q in queries:
            # the batch in flight is finished, not interrupted, however slow the machine
            stop_gracefully(q, timeout_s=300)
        keeper.join()
        progress.stats_batches, progress.stats_updates = sink.batches, sink.updates
        if own_session:
            spark.stop()
    rows, files = lake_size(lake, EVENTS)
    out.say(f"stopped: {progress.fleet.sent} sent; {rows} rows in {files} files in {EVENTS}, "
            f"{progress.quarantined} quarantined; look around: {progress.hint()}", "stopped",
            sent=progress.fleet.sent, rows=rows, files=files,
            quarantined=progress.quarantined, hint=progress.hint())
    return progress


def lake_size(lake: LakeConfig, name: str) -> tuple[int, int]:
    """(rows, data files) of the table now; (0, 0) when it was never made."""
    from pyiceberg.exceptions import NoSuchTableError

    from odradek.pipeline.lake_catalog import open_catalog
    from odradek.pipeline.maintenance import table_size

    try:
        size = table_size(open_catalog(lake).load_table(name))
    except NoSuchTableError:
        return 0, 0
    return size.rows, size.files


class LakeKeeper:
    """Compacts iot.events and expires the old snapshots of every table up writes every N
    ingest batches, on a thread of its own so the progress goes on meanwhile; one run at
    a time."""

    tables = (EVENTS, EVENTS + QUARANTINE_SUFFIX, "iot.device_stats", METER_TABLE,
              METER_TABLE + QUARANTINE_SUFFIX)

    def __init__(self, lake: LakeConfig, options: UpOptions, progress: Progress) -> None:
        self.lake = lake
        self.options = options
        self.progress = progress
        self.done_at = 0
        self.thread: threading.Thread | None = None

    def maybe_start(self) -> None:
        every = self.options.maintain_every
        if every <= 0 or self.progress.batches - self.done_at < every:
            return
        if self.thread is not None and self.thread.is_alive():
            return
        self.done_at = self.progress.batches
        self.thread = threading.Thread(target=self._run, name="lake-upkeep", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from odradek.pipeline.lake_catalog import open_catalog
        from odradek.pipeline.maintenance import compact

        try:
            catalog = open_catalog(self.lake)
            compacted = compact(catalog, EVENTS, self.options.target_file_bytes)
            self.expire_all(catalog)
        except Exception as e:  # shown with the progress; the ingest goes on regardless
            log.warning("lake upkeep of %s failed: %s", EVENTS, e)
            self.progress.errors.append(f"lake upkeep: {str(e).splitlines()[0]}")
            return
        self.progress.upkeeps += 1
        if compacted.deferred:
            self.progress.compactions_deferred += 1
        if compacted.files_replaced:
            self.progress.compactions += 1
            self.progress.files_compacted += compacted.files_replaced

    def expire_all(self, catalog: Catalog) -> dict[str, int]:
        """Expire each of up's tables that exists by its expiry properties (written first
        from the options, or up's defaults where the table has none); returns the
        snapshots each keeps."""
        from pyiceberg.exceptions import NoSuchTableError

        from odradek.pipeline.maintenance import (
            PROP_MAX_SNAPSHOT_AGE,
            PROP_MIN_SNAPSHOTS,
            ExpiryPolicy,
            expire,
            expiry_policy,
            set_expiry_policy,
        )

        o = self.options
        policy = ExpiryPolicy(
            dt.timedelta(seconds=UP_RETENTION_S if o.retain_snapshots_s is None
                         else o.retain_snapshots_s),
            UP_SNAPSHOTS_KEPT if o.snapshots_kept is None else o.snapshots_kept)
        kept: dict[str, int] = {}
        for name in self.tables:
            try:
                table = catalog.load_table(name)
                held = expiry_policy(table)
                props = table.properties
                # the option when given, else what the table holds, else up's default
                set_expiry_policy(catalog, name, ExpiryPolicy(
                    policy.max_age if o.retain_snapshots_s is not None
                    or PROP_MAX_SNAPSHOT_AGE not in props else held.max_age,
                    policy.min_snapshots if o.snapshots_kept is not None
                    or PROP_MIN_SNAPSHOTS not in props else held.min_snapshots))
                expired = expire(catalog, name, orphans_older_than=UP_ORPHAN_AGE)
            except NoSuchTableError:
                continue
            kept[name] = len(expired.kept)
        return kept

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join(120)
