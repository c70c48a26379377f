"""`odradek pipeline`: the stateful jobs and their interactive queries."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import typer
from rich.table import Table as RichTable

from odradek.cli.common import BootstrapOption, DataDirOption, console, fail, home_of
from odradek.cli.lake import CatalogOption, WarehouseOption, lake_for_writing
from odradek.cli.signals import long_running

app = typer.Typer(no_args_is_help=True,
                  help="Stateful stream jobs on Spark and queries into their live state.")


def _run(query: Any, spark: Any) -> None:
    from odradek.pipeline.session import plain_ctrl_c, stop_gracefully

    try:
        with plain_ctrl_c():
            while query.isActive:
                query.awaitTermination(1)
    except KeyboardInterrupt:
        console.print("stopping after the current batch…")
        stop_gracefully(query)
    error = query.exception()
    spark.stop()
    if error is not None:
        fail(str(error).splitlines()[0])


@app.command()
@long_running
def state(
    checkpoint: Path = typer.Argument(
        ..., help="The stateful query's checkpoint folder, or its name in the data home's "
                  "checkpoints/ (device-stats, wordcount-TOPIC)"),
    key: str | None = typer.Option(None, "--key", "-k",
                                   help="Only keys containing this (a device id, a word)"),
    operator: int | None = typer.Option(None, "--operator", help="State operator id"),
    batch_id: int | None = typer.Option(None, "--batch-id", help="State as of this batch"),
    limit: int = typer.Option(50, "--limit"),
    as_json: bool = typer.Option(False, "--json"),
    data_dir: Path | None = DataDirOption,
) -> None:
    """Read a stateful query's live state from its checkpoint (interactive queries)."""
    from odradek.pipeline.session import build_session
    from odradek.pipeline.stateful import read_state, state_operators

    if not checkpoint.exists() and len(checkpoint.parts) == 1:
        home = home_of(data_dir, writing=False)
        named = home.checkpoint(checkpoint.name)
        if not named.exists():
            known = sorted(p.name for p in home.checkpoints.glob("*/state")) \
                if home.checkpoints.is_dir() else []
            fail(home.missing(f"checkpoint {checkpoint.name!r}", named) +
                 (f" (stateful ones there: {', '.join(known)})" if known else ""))
        checkpoint = named
    if not (checkpoint / "state").is_dir():
        fail(f"no streaming state at {checkpoint / 'state'}: name a stateful query's "
             "checkpoint folder (odradek up keeps device-stats in the data home's checkpoints/)")
    spark = build_session(app_name="odradek-pipeline-state")
    try:
        ops = state_operators(spark, checkpoint)
        # As JSON text: a state value's fields can repeat a name (min, max, sum of
        # several aggregates), which a Python dict would silently merge.
        state = read_state(spark, checkpoint, key, operator, batch_id).selectExpr(
            "to_json(key) AS key", "to_json(value) AS value", "partition_id")
        rows = [r.asDict() for r in state.limit(limit).collect()]
    finally:
        spark.stop()
    if as_json:
        print(json.dumps({"operators": ops, "rows": rows}, default=str, indent=2))
        return
    for op in ops:
        console.print(f"operator {op['operatorId']} {op['operatorName']}: "
                      f"{op['numPartitions']} partitions, batches {op['minBatchId']}"
                      f" to {op['maxBatchId']}")
    out = RichTable()
    for name in ("key", "value", "partition"):
        out.add_column(name, overflow="fold")
    for r in rows:
        out.add_row(r["key"], r["value"], str(r["partition_id"]))
    console.print(out)


@app.command("device-stats")
@long_running
def device_stats_cmd(
    bootstrap: str = BootstrapOption,
    topic_pattern: str = typer.Option(r"fleet\.(camera|door|climate)", "--topic-pattern"),
    stats_topic: str = typer.Option("fleet.device-stats", "--stats-topic",
                                    help="Compacted topic for the results"),
    table: str = typer.Option("iot.device_stats", "--table"),
    window: str = typer.Option("1 minute", "--window"),
    watermark: str = typer.Option("30 seconds", "--watermark"),
    data_dir: Path | None = DataDirOption,
    catalog_uri: str | None = CatalogOption,
    warehouse: str | None = WarehouseOption,
    checkpoint: Path | None = typer.Option(None, "--checkpoint"),
    available_now: bool = typer.Option(False, "--available-now"),
) -> None:
    """Per-device windowed statistics into a compacted topic and the lake."""
    from odradek.pipeline.session import build_session
    from odradek.pipeline.stateful import device_stats, device_stats_sink, start_stateful

    lake = lake_for_writing(data_dir, catalog_uri, warehouse)
    ckpt = (checkpoint or home_of(data_dir, writing=True).checkpoint("device-stats")).resolve()
    spark = build_session(app_name="odradek-device-stats")
    frame = device_stats(spark, bootstrap, topic_pattern, window, watermark)
    query = start_stateful(spark, frame, device_stats_sink(bootstrap, lake, stats_topic, table),
                           ckpt, "device-stats", available_now)
    console.print(f"device stats → {stats_topic} and {table}; state in {ckpt} "
                  f"(odradek pipeline state {shlex.quote(str(ckpt))} --key DEVICE)",
                  soft_wrap=True)
    _run(query, spark)


@app.command()
@long_running
def wordcount(
    topic: str = typer.Option(..., "--topic", "-t", help="Topic of text lines"),
    bootstrap: str = BootstrapOption,
    output_topic: str | None = typer.Option(None, "--output-topic",
                                            help="Compacted topic (default TOPIC-word-counts)"),
    table: str = typer.Option("text.word_counts", "--table"),
    data_dir: Path | None = DataDirOption,
    catalog_uri: str | None = CatalogOption,
    warehouse: str | None = WarehouseOption,
    checkpoint: Path | None = typer.Option(None, "--checkpoint"),
    available_now: bool = typer.Option(False, "--available-now"),
) -> None:
    """Kafka Streams' word count on Spark: counts to a compacted topic and the lake."""
    from odradek.pipeline.session import build_session
    from odradek.pipeline.stateful import start_stateful, word_count_sink, word_counts

    lake = lake_for_writing(data_dir, catalog_uri, warehouse)
    out = output_topic or f"{topic}-word-counts"
    ckpt = (checkpoint or home_of(data_dir, writing=True).checkpoint(f"wordcount-{topic}")
            ).resolve()
    spark = build_session(app_name="odradek-wordcount")
    query = start_stateful(spark, word_counts(spark, bootstrap, topic),
                           word_count_sink(bootstrap, lake, out, table), ckpt, "wordcount",
                           available_now)
    console.print(f"word count of {topic} → {out} and {table}; state in {ckpt}")
    _run(query, spark)


if __name__ == "__main__":
    sys.exit(app())
