"""Entry point of the `odradek` command."""

from __future__ import annotations

import typer

from odradek.cli import broker as broker_cmd
from odradek.cli import configs, console_io, dump_log, topics

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="odradek: Kafka-compatible streaming in Python",
    pretty_exceptions_enable=False,
)

app.command("broker")(broker_cmd.broker)
app.add_typer(topics.app, name="topics")
app.add_typer(configs.app, name="configs")
app.command("produce")(console_io.produce)
app.command("consume")(console_io.consume)
app.command("dump-log")(dump_log.dump_log)


@app.command("up")
def up(
    log_level: str = typer.Option("INFO", "--log-level", envvar="ODRADEK_LOG_LEVEL"),
) -> None:
    """Run the main job on embedded defaults: a broker on localhost:9092."""
    broker_cmd.broker(None, None, log_level)


def main() -> None:
    app()
