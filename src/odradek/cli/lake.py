"""`odradek lake`: the ingest job (topics → Iceberg) and the catalog tools."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.table import Table as RichTable

from odradek.cli.common import BootstrapOption, DataDirOption, console, fail, home_of
from odradek.cli.signals import long_running

app = typer.Typer(no_args_is_help=True,
                  help="The data lake: ingest topics into Iceberg tables; browse the catalog.")

CatalogOption = typer.Option(
    None, "--catalog-uri",
    help="SQLAlchemy URL of the catalog (default: SQLite in the data home's lake/)")
WarehouseOption = typer.Option(None, "--warehouse", help="Warehouse folder or URI")


def lake_for_writing(data_dir: Path | None, catalog_uri: str | None,
                     warehouse: str | None) -> Any:
    """The lake a writing command lands in: the data home's lake/, made if need be.

    ODRADEK_LAKE_DIR (a lake folder itself: catalog.db and warehouse/) still works for
    scripts written before the data home.
    """
    from odradek.pipeline.lake_catalog import LakeConfig

    legacy = os.environ.get("ODRADEK_LAKE_DIR")
    if catalog_uri is not None and warehouse is not None:
        if "://" not in warehouse:
            Path(warehouse).mkdir(parents=True, exist_ok=True)
            warehouse = Path(warehouse).absolute().as_uri()
        return LakeConfig(catalog_uri, warehouse)
    if data_dir is None and legacy:
        return LakeConfig.resolve(Path(legacy), catalog_uri, warehouse)
    return LakeConfig.resolve(home_of(data_dir, writing=True).lake, catalog_uri, warehouse)


def _catalog(data_dir: Path | None, catalog_uri: str | None, warehouse: str | None) -> Any:
    """The catalog for reading: a missing one is one line and nothing is created."""
    from odradek.home import Home
    from odradek.pipeline.catalog_tools import LakeNotFoundError, open_existing

    legacy = os.environ.get("ODRADEK_LAKE_DIR")
    if data_dir is None and legacy and catalog_uri is None:
        # the variable from before the data home names a lake folder (catalog.db inside)
        lake = Path(legacy).absolute()
        if not (lake / "catalog.db").is_file():
            fail(f"no lake catalog at {lake / 'catalog.db'} (ODRADEK_LAKE_DIR): unset it to "
                 "read the data home's lake")
        catalog_uri = f"sqlite:///{lake / 'catalog.db'}"
        warehouse = warehouse or (lake / "warehouse").as_uri()
    home = Home.at(data_dir) if catalog_uri is not None else home_of(data_dir, writing=False)
    try:
        return open_existing(home, catalog_uri, warehouse)
    except LakeNotFoundError as e:
        fail(str(e))


def _no_table(table: str, catalog: Any) -> NoReturn:
    where = catalog.properties.get("uri", "the catalog")
    fail(f"no table {table} in {where}: odradek lake tables lists the tables there")


def _spark_conf(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            fail(f"--conf {pair}: give KEY=VALUE, e.g. --conf spark.executor.memory=2g")
        out[key.strip()] = value
    return out


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else repr(e)


def _table_name(name: str) -> str:
    return name if "." in name else f"default.{name}"


@app.command()
@long_running
def ingest(
    table: str = typer.Option(..., "--table", help="Target table, namespace.name"),
    topic: list[str] | None = typer.Option(None, "--topic", "-t", help="Topic (repeatable)"),
    topic_pattern: str | None = typer.Option(None, "--topic-pattern",
                                             help="Regex of topics (instead of --topic)"),
    bootstrap: str = BootstrapOption,
    data_dir: Path | None = DataDirOption,
    catalog_uri: str | None = CatalogOption,
    warehouse: str | None = WarehouseOption,
    checkpoint: Path | None = typer.Option(
        None, "--checkpoint",
        help="Spark checkpoint (default: checkpoints/TABLE in the data home)"),
    available_now: bool = typer.Option(False, "--available-now",
                                       help="Ingest what is there now, then stop"),
    max_offsets_per_trigger: int | None = typer.Option(None, "--max-offsets-per-trigger"),
    starting_offsets: str = typer.Option("earliest", "--starting-offsets"),
    interval: str = typer.Option("2 seconds", "--trigger-interval"),
    avro_schema: Path | None = typer.Option(
        None, "--avro-schema", help="Values are Avro records of this schema (.avsc), not JSON"),
    confluent_framing: bool = typer.Option(
        True, "--confluent-framing/--no-confluent-framing",
        help="Avro values carry Confluent's magic byte and schema id"),
    schema_registry: str | None = typer.Option(
        None, "--schema-registry",
        help="Values are Confluent-framed (Avro, JSON Schema, Protobuf): decode each by its "
             "schema id through the registry at this URL"),
    master: str = typer.Option(
        "local[2]", "--master",
        help="Spark master: local[N], spark://HOST:PORT (standalone), yarn, k8s://… — on a "
             "cluster the warehouse and checkpoint must be paths every node sees"),
    conf: list[str] | None = typer.Option(
        None, "--conf", help="Spark setting KEY=VALUE (repeatable), as spark-submit --conf"),
) -> None:
    """Stream topics into an Iceberg table, one atomic snapshot per micro-batch."""
    from odradek.pipeline.ingest import IngestJob, start_ingest
    from odradek.pipeline.lake_writer import BatchResult
    from odradek.pipeline.session import build_session, plain_ctrl_c, stop_gracefully

    if not topic and not topic_pattern:
        fail("name the topics: --topic T (repeatable) or --topic-pattern REGEX")
    if avro_schema is not None and schema_registry is not None:
        fail("--avro-schema and --schema-registry exclude each other: one decoder per job")
    spark_conf = _spark_conf(conf or [])
    lake = lake_for_writing(data_dir, catalog_uri, warehouse)
    ckpt = checkpoint or home_of(data_dir, writing=True).checkpoint(_table_name(table))
    job = IngestJob(bootstrap=bootstrap, table=_table_name(table), lake=lake,
                    checkpoint=ckpt.resolve(), topics=list(topic or []),
                    topic_pattern=topic_pattern, available_now=available_now,
                    trigger_interval=interval, max_offsets_per_trigger=max_offsets_per_trigger,
                    starting_offsets=starting_offsets, avro_schema=avro_schema,
                    confluent_framing=confluent_framing, schema_registry=schema_registry)
    console.print(f"ingesting {topic_pattern or ', '.join(topic or [])} → {job.table} "
                  f"(catalog {lake.catalog_uri}, checkpoint {job.checkpoint})")
    started = time.monotonic()
    totals = {"rows": 0, "quarantined": 0}

    def progress(r: BatchResult) -> None:
        if r.skipped:
            console.print(f"batch {r.batch_id}: already in the table (replay skipped)")
            return
        totals["rows"] += r.rows
        totals["quarantined"] += r.quarantined
        extra = ", schema evolved" if r.evolved else ""
        if r.conflicts:
            extra += ", conflicts: " + ", ".join(c.column for c in r.conflicts)
        console.print(f"batch {r.batch_id}: {r.rows} rows, {r.quarantined} quarantined"
                      f"{extra} (total {totals['rows']} in {time.monotonic() - started:.0f}s)")

    try:
        spark = build_session(master=master, app_name=f"odradek-lake-ingest-{job.table}",
                              extra=spark_conf)
    except Exception as e:
        fail(f"cannot start Spark on {master}: {_first_line(e)}")
    try:
        query = start_ingest(spark, job, on_batch=progress)
    except Exception as e:
        spark.stop()
        fail(str(e).splitlines()[0] if str(e) else repr(e))
    try:
        with plain_ctrl_c():
            while query.isActive:
                query.awaitTermination(1)
    except KeyboardInterrupt:
        pass
    finally:
        if query.isActive:
            console.print("stopping the ingest query after its current batch…")
            stop_gracefully(query)
        error = query.exception()
        spark.stop()
    if error is not None:
        fail(str(error).splitlines()[0])
    console.print(f"done: {totals['rows']} rows, {totals['quarantined']} quarantined")


@app.command()
def tables(data_dir: Path | None = DataDirOption, catalog_uri: str | None = CatalogOption,
           warehouse: str | None = WarehouseOption) -> None:
    """List the lake's tables with rows, files, freshness and conflicts."""
    from odradek.pipeline.catalog_tools import all_tables, summarize

    catalog = _catalog(data_dir, catalog_uri, warehouse)
    out = RichTable("table", "kind", "rows", "files", "columns", "last commit", "conflicts")
    for name in all_tables(catalog):
        s = summarize(catalog, name)
        out.add_row(s.name, s.kind, str(s.rows), str(s.files), str(s.columns), s.last_commit,
                    str(s.conflicts))
    console.print(out)


@app.command()
def describe(table: str = typer.Argument(..., help="namespace.name"),
             data_dir: Path | None = DataDirOption, catalog_uri: str | None = CatalogOption,
             warehouse: str | None = WarehouseOption,
             as_json: bool = typer.Option(False, "--json")) -> None:
    """Schema, schema history, partitions, rows, freshness, offsets and type conflicts."""
    from pyiceberg.exceptions import NoSuchTableError

    from odradek.pipeline.catalog_tools import describe as describe_table

    catalog = _catalog(data_dir, catalog_uri, warehouse)
    try:
        d = describe_table(catalog, _table_name(table))
    except NoSuchTableError:
        _no_table(table, catalog)
    if as_json:
        print(json.dumps(d.__dict__, default=str, indent=2))
        return
    console.print(f"[bold]{d.name}[/bold]  {d.rows} rows in {d.files} files; last commit "
                  f"{d.last_commit}; newest event {d.newest_event}\n{d.location}")
    cols = RichTable("column", "type", "doc", title="schema")
    for path, type_, doc in d.columns:
        cols.add_row(path, type_, doc)
    console.print(cols)
    console.print("partitioned by: " + ", ".join(d.partition_spec))
    hist = RichTable("schema id", "columns", "added", "removed", title="schema history")
    for h in d.schema_history:
        hist.add_row(str(h["schema_id"]), str(h["columns"]), ", ".join(h["added"]),
                     ", ".join(h["removed"]))
    console.print(hist)
    parts = RichTable("partition", "rows", "files", "last updated", title="partitions")
    for p in d.partitions:
        parts.add_row(p["partition"], str(p["rows"]), str(p["files"]), p["last_updated"])
    console.print(parts)
    console.print("kafka offsets covered (next to read): " + json.dumps(d.offsets))
    if d.conflicts:
        conf = RichTable("column", "table type", "seen", "resolution", "first batch",
                         title="type conflicts")
        for c in d.conflicts:
            conf.add_row(c["column"], c["table_type"], c["seen_type"], c["resolution"],
                         str(c.get("first_batch", "")))
        console.print(conf)


@app.command()
def history(table: str = typer.Argument(..., help="namespace.name"),
            data_dir: Path | None = DataDirOption, catalog_uri: str | None = CatalogOption,
            warehouse: str | None = WarehouseOption) -> None:
    """Snapshots: when, how many rows, which query batch, which Kafka offsets."""
    from pyiceberg.exceptions import NoSuchTableError

    from odradek.pipeline.catalog_tools import history as table_history

    catalog = _catalog(data_dir, catalog_uri, warehouse)
    try:
        rows = table_history(catalog, _table_name(table))
    except NoSuchTableError:
        _no_table(table, catalog)
    out = RichTable("snapshot", "committed", "op", "schema", "rows", "quarantined", "batch",
                    "offsets (start → end)")
    for h in rows:
        offsets = ""
        if h["end_offsets"] is not None:
            offsets = f"{json.dumps(h['start_offsets'])} → {json.dumps(h['end_offsets'])}" \
                if h["start_offsets"] else f"→ {json.dumps(h['end_offsets'])}"
        out.add_row(str(h["snapshot_id"]), h["committed"], h["operation"], str(h["schema_id"]),
                    str(h["added_rows"]), str(h["quarantined"]), str(h["batch_id"]), offsets)
    console.print(out)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _duration(text: str, option: str) -> float:
    value, unit = text.strip()[:-1], text.strip()[-1:].lower()
    if unit.isdigit():
        value, unit = text.strip(), "s"
    try:
        seconds = float(value) * _UNITS[unit]
    except (KeyError, ValueError):
        fail(f"{option} {text}: expected a number with s, m, h or d (30m, 1h, 7d)")
    if seconds < 0:
        fail(f"{option} {text}: must not be negative")
    return seconds


@app.command()
def maintain(table: str = typer.Argument(..., help="namespace.name"),
             data_dir: Path | None = DataDirOption, catalog_uri: str | None = CatalogOption,
             warehouse: str | None = WarehouseOption,
             target_file_size: int = typer.Option(64, "--target-file-size", min=1,
                                                  help="MiB per file after compaction"),
             retention: str | None = typer.Option(
                 None, "--retention",
                 help="Expire snapshots older than this (30m, 1h, 7d) and delete unreferenced "
                      "files older than this. Default: the table's "
                      "history.expire.max-snapshot-age-ms (Iceberg's default 5 days), files "
                      "at least 1h old. The newest history.expire.min-snapshots-to-keep "
                      "snapshots (default 1) always stay"),
             as_json: bool = typer.Option(False, "--json")) -> None:
    """Compact small files into files of the target size, then expire old snapshots.

    Safe beside a running ingest: a commit that races with it is retried, and the Kafka
    offsets the table records are kept.
    """
    import datetime as dt

    from pyiceberg.exceptions import NoSuchTableError

    from odradek.pipeline.maintenance import ExpiryPropertyError, describe_result
    from odradek.pipeline.maintenance import maintain as run_maintenance

    keep = None if retention is None else dt.timedelta(
        seconds=_duration(retention, "--retention"))
    catalog = _catalog(data_dir, catalog_uri, warehouse)
    try:
        c, e, size = run_maintenance(catalog, _table_name(table), target_file_size << 20, keep)
    except NoSuchTableError:
        _no_table(table, catalog)
    except ExpiryPropertyError as bad:
        fail(f"{_table_name(table)}: {bad}")
    if as_json:
        print(json.dumps(describe_result(c, e, size)))
        return
    console.print(f"{c.table}: {c.files_replaced} small files in {c.partitions} partitions "
                  f"rewritten as {c.files_written}; {e.snapshots_expired} snapshots expired, "
                  f"{e.files_deleted} unreferenced files deleted; now {size.rows} rows in "
                  f"{size.files} files", soft_wrap=True, highlight=False)


@app.command()
def search(term: str = typer.Argument(..., help="Part of a table or column name"),
           data_dir: Path | None = DataDirOption, catalog_uri: str | None = CatalogOption,
           warehouse: str | None = WarehouseOption) -> None:
    """Find tables and columns by name (nested columns and conflicts included)."""
    from odradek.pipeline.catalog_tools import search as search_catalog

    hits = search_catalog(_catalog(data_dir, catalog_uri, warehouse), term)
    if not hits:
        console.print(f"nothing matches {term!r}")
        return
    out = RichTable("table", "match", "name", "type")
    for h in hits:
        out.add_row(h["table"], h["match"], h["what"], h["type"])
    console.print(out)


if __name__ == "__main__":
    sys.exit(app())


def _timestamp(text: str) -> Any:
    import datetime as dt

    try:
        when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        fail(f"--as-of {text}: give an ISO timestamp, e.g. 2026-11-27T10:00:00Z")
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


@app.command()
def query(sql: str = typer.Argument(..., help="SQL over lake tables (iot.events, …)"),
          data_dir: Path | None = DataDirOption, catalog_uri: str | None = CatalogOption,
          warehouse: str | None = WarehouseOption,
          snapshot_id: int | None = typer.Option(
              None, "--snapshot-id", help="Read the table that has this snapshot at it"),
          as_of: str | None = typer.Option(
              None, "--as-of", help="Read each table as it was at this time (ISO, UTC "
                                    "unless a zone is given)"),
          as_of_offset: str | None = typer.Option(
              None, "--as-of-offset",
              help="TOPIC:PARTITION:OFFSET: read each table at its first snapshot that holds "
                   "that record"),
          as_json: bool = typer.Option(False, "--json", help="One JSON object per row")) -> None:
    """Ad-hoc SQL over lake tables through DuckDB, now or back in time."""
    from odradek.pipeline.lake_query import AsOfOffset, QueryError, TimeTravel, run_query

    if sum(x is not None for x in (snapshot_id, as_of, as_of_offset)) > 1:
        fail("--snapshot-id, --as-of and --as-of-offset exclude each other: one point in time")
    try:
        travel = TimeTravel(snapshot_id=snapshot_id,
                            as_of=_timestamp(as_of) if as_of is not None else None,
                            as_of_offset=AsOfOffset.parse(as_of_offset)
                            if as_of_offset is not None else None)
        result = run_query(_catalog(data_dir, catalog_uri, warehouse), sql, travel)
    except QueryError as e:
        fail(str(e))
    if as_json:
        for record in result.as_dicts():
            sys.stdout.write(json.dumps(record, default=str) + "\n")
        return
    out = RichTable(*result.columns)
    for row in result.rows:
        out.add_row(*("" if v is None else str(v) for v in row))
    console.print(out)
    read = ", ".join(f"{t} at snapshot {s}" for t, s in result.snapshots.items())
    console.print(f"{len(result.rows)} rows" + (f" ({read})" if read else ""))
