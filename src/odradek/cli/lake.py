"""`odradek lake`: the ingest job (topics → Iceberg) and the catalog tools."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import typer
from rich.table import Table as RichTable

from odradek.cli.common import BootstrapOption, console, fail
from odradek.cli.signals import long_running

app = typer.Typer(no_args_is_help=True,
                  help="The data lake: ingest topics into Iceberg tables; browse the catalog.")

DEFAULT_DIR = Path(os.environ.get("ODRADEK_LAKE_DIR", "odradek-data/lake"))

DataDirOption = typer.Option(DEFAULT_DIR, "--data-dir",
                             help="Where the default SQLite catalog and warehouse live")
CatalogOption = typer.Option(None, "--catalog-uri",
                             help="SQLAlchemy URL of the catalog (default: SQLite in --data-dir)")
WarehouseOption = typer.Option(None, "--warehouse", help="Warehouse folder or URI")


def _lake(data_dir: Path, catalog_uri: str | None, warehouse: str | None) -> Any:
    from odradek.pipeline.lake_catalog import LakeConfig

    return LakeConfig.resolve(data_dir, catalog_uri, warehouse)


def _catalog(data_dir: Path, catalog_uri: str | None, warehouse: str | None) -> Any:
    from odradek.pipeline.lake_catalog import open_catalog

    return open_catalog(_lake(data_dir, catalog_uri, warehouse))


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
    data_dir: Path = DataDirOption,
    catalog_uri: str | None = CatalogOption,
    warehouse: str | None = WarehouseOption,
    checkpoint: Path | None = typer.Option(None, "--checkpoint",
                                           help="Spark checkpoint (default: in --data-dir)"),
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
) -> None:
    """Stream topics into an Iceberg table, one atomic snapshot per micro-batch."""
    from odradek.pipeline.ingest import IngestJob, start_ingest
    from odradek.pipeline.lake_writer import BatchResult
    from odradek.pipeline.session import build_session, plain_ctrl_c, stop_gracefully

    if not topic and not topic_pattern:
        fail("name the topics: --topic T (repeatable) or --topic-pattern REGEX")
    if avro_schema is not None and schema_registry is not None:
        fail("--avro-schema and --schema-registry exclude each other: one decoder per job")
    lake = _lake(data_dir, catalog_uri, warehouse)
    ckpt = checkpoint or (data_dir / "checkpoints" / _table_name(table))
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

    spark = build_session(app_name=f"odradek-lake-ingest-{job.table}")
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
def tables(data_dir: Path = DataDirOption, catalog_uri: str | None = CatalogOption,
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
             data_dir: Path = DataDirOption, catalog_uri: str | None = CatalogOption,
             warehouse: str | None = WarehouseOption,
             as_json: bool = typer.Option(False, "--json")) -> None:
    """Schema, schema history, partitions, rows, freshness, offsets and type conflicts."""
    from pyiceberg.exceptions import NoSuchTableError

    from odradek.pipeline.catalog_tools import describe as describe_table

    try:
        d = describe_table(_catalog(data_dir, catalog_uri, warehouse), _table_name(table))
    except NoSuchTableError:
        fail(f"no table {table} in the catalog (odradek lake tables lists them)")
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
            data_dir: Path = DataDirOption, catalog_uri: str | None = CatalogOption,
            warehouse: str | None = WarehouseOption) -> None:
    """Snapshots: when, how many rows, which query batch, which Kafka offsets."""
    from pyiceberg.exceptions import NoSuchTableError

    from odradek.pipeline.catalog_tools import history as table_history

    try:
        rows = table_history(_catalog(data_dir, catalog_uri, warehouse), _table_name(table))
    except NoSuchTableError:
        fail(f"no table {table} in the catalog")
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


@app.command()
def search(term: str = typer.Argument(..., help="Part of a table or column name"),
           data_dir: Path = DataDirOption, catalog_uri: str | None = CatalogOption,
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
