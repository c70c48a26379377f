"""`odradek console`: the web console, a Kafka client of any cluster."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from odradek.cli.common import BOOTSTRAP_HELP, DEFAULT_BOOTSTRAP, console, fail

if TYPE_CHECKING:
    from odradek.console.settings import ConsoleSettings


def default_catalog_uri() -> str:
    """The catalog `odradek up` writes: lake/catalog.db in the data home."""
    from odradek.home import Home

    return f"sqlite:///{Home.at().catalog_db}"


def read_client_config(path: Path) -> dict[str, Any]:
    """A client .properties file, as Kafka's tools take with --command-config: the Java
    client's names (sasl.jaas.config, …) become librdkafka's, as the kafka-* tools do."""
    from odradek.cli.kafka.client import librdkafka_config
    from odradek.configdef import read_properties

    try:
        return librdkafka_config(read_properties(path))
    except OSError as e:
        fail(f"cannot read --command-config {path}: {e.strerror}")


def _check_client_config(settings: ConsoleSettings) -> None:
    """librdkafka refuses an unknown or malformed property: say so now, in one line."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from odradek.cli.common import error_text

    try:
        AdminClient(settings.kafka_config())
    except (KafkaException, ValueError, TypeError) as e:
        fail(f"the client config is not valid: {error_text(e)}")


def run_console(
    bootstrap: str = typer.Option(DEFAULT_BOOTSTRAP, "--bootstrap-server", "-b",
                                  help=BOOTSTRAP_HELP, envvar="ODRADEK_BOOTSTRAP_SERVER"),
    command_config: Path | None = typer.Option(
        None, "--command-config", help="Client properties (security.protocol, sasl.*, ssl.*)"),
    port: int = typer.Option(8080, "--port", help="Port to serve the console on"),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to serve on"),
    lake_catalog_uri: str | None = typer.Option(
        None, "--lake-catalog-uri",
        help="SQLAlchemy URL of the lake's Iceberg catalog (default: the one odradek up "
        "writes)"),
    read_only: bool = typer.Option(False, "--read-only", help="Hide every mutating action"),
    refresh: float = typer.Option(2.0, "--refresh", help="Seconds between samples of the "
                                  "cluster (live pages and charts)"),
) -> None:
    """Serve the web console: overview, topics, messages, groups, brokers, transactions,
    the lake and health, live in the browser."""
    from odradek.console.serve import build_server, port_free
    from odradek.console.settings import ConsoleSettings

    if not 0 < port < 65536:
        fail(f"--port must be between 1 and 65535, got {port}")
    if refresh <= 0:
        fail(f"--refresh must be positive, got {refresh}")
    if not port_free(host, port):
        fail(f"something already listens on {host}:{port}; choose another --port")
    settings = ConsoleSettings(
        bootstrap=bootstrap,
        client_config=read_client_config(command_config) if command_config else {},
        read_only=read_only, lake_catalog_uri=lake_catalog_uri or default_catalog_uri(),
        refresh_s=refresh)
    _check_client_config(settings)
    console.print(f"odradek console on http://{host}:{port}/ for {bootstrap}"
                  f"{' (read-only)' if read_only else ''}; Ctrl-C stops it", highlight=False)
    build_server(settings, host, port).run()
