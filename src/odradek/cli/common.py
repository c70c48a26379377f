"""What the CLI commands share: error reporting, bootstrap options, client configs."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console

from odradek.home import Home, HomeError

console = Console()
err_console = Console(stderr=True)

BOOTSTRAP_HELP = "Kafka bootstrap server(s), host:port[,host:port]"
DEFAULT_BOOTSTRAP = "localhost:9092"

BootstrapOption = typer.Option(DEFAULT_BOOTSTRAP, "--bootstrap-server", "-b",
                               help=BOOTSTRAP_HELP, envvar="ODRADEK_BOOTSTRAP_SERVER")

F = TypeVar("F", bound=Callable[..., Any])

DATA_DIR_HELP = ("The data home: broker data in data/, the lake in lake/, checkpoints in "
                 "checkpoints/ (default $ODRADEK_HOME, else ~/.local/share/odradek)")
DataDirOption = typer.Option(None, "--data-dir", help=DATA_DIR_HELP, show_default=False)


def home_of(data_dir: Path | None, *, writing: bool) -> Home:
    """The data home `--data-dir` names (or the default one), checked; created only for a
    command that writes into it. A home it cannot use ends the command in one line."""
    home = Home.at(data_dir)
    try:
        if writing:
            return home.prepare()
        home.check()
        return home
    except HomeError as e:
        fail(str(e))


def fail(message: str, code: int = 1) -> NoReturn:
    """One line on stderr and a non-zero exit."""
    err_console.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@contextmanager
def reported() -> Iterator[None]:
    """Turn client and config exceptions into one-line errors."""
    from confluent_kafka import KafkaException

    from odradek.client import ClientError
    from odradek.configdef import ConfigError

    try:
        yield
    except typer.Exit:
        raise
    except KafkaException as e:
        fail(error_text(e))
    except (ClientError, ConfigError, ValueError, OSError) as e:
        fail(str(e))
    except KeyboardInterrupt:
        sys.exit(130)


def error_text(e: BaseException) -> str:
    """The message of a confluent-kafka exception (it wraps a KafkaError)."""
    err = e.args[0] if e.args else e
    method = getattr(err, "str", None)
    return str(method()) if callable(method) else str(err)


# Client properties a Kafka-syntax front end read from `--command-config FILE`: every
# client the command makes gets them, so the odradek commands it calls honour that file.
command_properties: ContextVar[dict[str, Any] | None] = ContextVar("command_properties",
                                                                  default=None)


def client_config(bootstrap: str, extra: list[str] | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {**(command_properties.get() or {}), "bootstrap.servers": bootstrap,
                            "log_level": 3}
    for item in extra or []:
        key, sep, value = item.partition("=")
        if not sep:
            fail(f"expected key=value, got '{item}'")
        conf[key.strip()] = value.strip()
    return conf


def parse_pairs(items: list[str] | None, what: str = "config") -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        for part in item.split(",") if "=" in item and item.count("=") > 1 else [item]:
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                fail(f"invalid {what} '{part}': expected key=value")
            out[key.strip()] = value.strip()
    return out
