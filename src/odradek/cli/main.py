"""Entry point of the `odradek` command."""

from __future__ import annotations

import typer

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="odradek: Kafka-compatible streaming in Python",
)


def main() -> None:
    app()
