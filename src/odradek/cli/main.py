"""Entry point of the `odradek` command."""

from __future__ import annotations

from pathlib import Path

import typer

from odradek.cli import (
    acls,
    advise,
    cluster,
    configs,
    console,
    console_io,
    delete_records,
    demo,
    dump_log,
    groups,
    health,
    lag,
    lake,
    leader_election,
    perf,
    pipeline_cmd,
    reassign,
    schemas,
    share_groups,
    topics,
    transactions,
)
from odradek.cli import broker as broker_cmd
from odradek.cli.common import DataDirOption, fail
from odradek.cli.kafka.path import kafka_path
from odradek.cli.kafka.tools import TOOLS as KAFKA_TOOLS
from odradek.cli.signals import long_running

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="odradek: Kafka-compatible streaming in Python",
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

app.command("broker")(broker_cmd.broker)
app.add_typer(topics.app, name="topics")
app.add_typer(configs.app, name="configs")
app.command("produce")(console_io.produce)
app.command("consume")(console_io.consume)
app.command("dump-log")(dump_log.dump_log)
app.command("acls")(acls.acls)
app.command("delete-records")(delete_records.delete_records)
app.add_typer(groups.app, name="groups")
app.add_typer(share_groups.app, name="share-groups")
app.command("lag")(lag.lag)
app.add_typer(advise.app, name="advise")
app.command("health")(health.health)
app.add_typer(transactions.app, name="transactions")
app.add_typer(perf.app, name="perf")
app.add_typer(lake.app, name="lake")
app.add_typer(pipeline_cmd.app, name="pipeline")
app.add_typer(demo.app, name="demo")
app.add_typer(cluster.app, name="cluster")
app.command("reassign")(reassign.reassign)
app.command("leader-election")(leader_election.leader_election)
app.command("console")(long_running(console.run_console))
app.command("schema-registry")(long_running(schemas.schema_registry))
app.add_typer(schemas.app, name="schemas")

# Kafka's own tools with Kafka's flags (joptsimple's syntax, which typer cannot parse):
# every argument goes through untouched to the tool's own parser.
_RAW = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def _kafka_tool(name: str) -> None:
    def command(ctx: typer.Context) -> None:
        from odradek.cli.kafka.tools import run

        raise typer.Exit(run(name, list(ctx.args)))

    command.__doc__ = f"Kafka's {name}.sh, with its flags and output."
    # the console tools and perf tests run until stopped
    app.command(name, context_settings=_RAW, add_help_option=False)(long_running(command))


for _tool in KAFKA_TOOLS:
    _kafka_tool(_tool)
app.command("kafka-path")(kafka_path)


@app.command("up")
@long_running
def up(
    rate: float = typer.Option(200.0, "--rate", help="Fleet events per second"),
    devices: int = typer.Option(30, "--devices"),
    duration: float | None = typer.Option(None, "--duration",
                                          help="Stop after this many seconds"),
    log_level: str = typer.Option("WARNING", "--log-level", envvar="ODRADEK_LOG_LEVEL"),
    data_dir: Path | None = DataDirOption,
    log_format: str = typer.Option(
        "auto", "--log-format",
        help="table (live, on a terminal), text (a plain line every --progress-interval) "
             "or json (the same as JSON lines); auto: table on a terminal, else text"),
    progress_interval: float = typer.Option(10.0, "--progress-interval", min=0.5,
                                            help="Seconds between two progress lines"),
    maintain_every: int = typer.Option(
        50, "--maintain-every", min=0,
        help="Compact iot.events and expire old snapshots every N ingest batches (0: never)"),
    retention: float | None = typer.Option(
        None, "--snapshot-retention", min=0, show_default=False,
        help="Expire snapshots older than this many seconds (written to each table as "
             "history.expire.max-snapshot-age-ms; default: the table's, else 120)"),
    snapshots_kept: int | None = typer.Option(
        None, "--snapshots-kept", min=1, show_default=False,
        help="Keep at least this many newest snapshots whatever their age (each table's "
             "history.expire.min-snapshots-to-keep; default: the table's, else 100)"),
) -> None:
    """Broker, device fleet, lake ingest and device stats on embedded defaults.

    The broker listens on localhost:9092; everything it keeps is in the data home
    ($ODRADEK_HOME, default ~/.local/share/odradek). Ctrl-C stops everything cleanly.
    """
    from odradek.cli.up import run
    from odradek.pipeline.reporting import LOG_FORMATS

    if log_format not in LOG_FORMATS:
        fail(f"--log-format {log_format}: choose one of {', '.join(LOG_FORMATS)}")
    run(rate=rate, devices=devices, duration=duration, log_level=log_level,
        data_dir=data_dir, log_format=log_format, progress_interval=progress_interval,
        maintain_every=maintain_every, retention=retention, snapshots_kept=snapshots_kept)


def main() -> None:
    app()
