"""`odradek broker`: start a broker, as Kafka's kafka-server-start.sh does."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import typer

from odradek.cli.common import DataDirOption, fail, home_of, parse_pairs
from odradek.cli.signals import long_running
from odradek.configdef import ConfigError


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def install_event_loop() -> None:
    """uvloop by default: it costs a third less CPU per small request than asyncio's loop
    (docs/performance.md). ODRADEK_EVENT_LOOP=asyncio picks the standard loop."""
    if os.environ.get("ODRADEK_EVENT_LOOP", "uvloop") == "uvloop":
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


@long_running
def broker(
    properties: Path | None = typer.Argument(None, help="server.properties file",
                                             exists=True, dir_okay=False),
    override: list[str] | None = typer.Option(None, "--override",
                                              help="property=value, repeatable"),
    log_level: str = typer.Option("INFO", "--log-level", envvar="ODRADEK_LOG_LEVEL"),
    data_dir: Path | None = DataDirOption,
) -> None:
    """Start a broker: `odradek broker [server.properties] [--override key=value ...]`.

    Its partitions live in data/ of the data home unless log.dirs names other folders.
    """
    from odradek.server.config import BrokerConfig
    from odradek.server.run import HostedService, run_broker

    setup_logging(log_level)
    overrides = parse_pairs(override, "override")
    try:
        config = BrokerConfig.load(properties, overrides)
        explicit_dirs = {"log.dirs", "log.dir"} & config.explicit
        if data_dir is not None and explicit_dirs:
            fail(f"--data-dir and {sorted(explicit_dirs)[0]} both say where the partitions "
                 "go: give one of them")
        if not explicit_dirs:  # the data home's data/: checked, made and marked as ours
            home = home_of(data_dir, writing=True)
            if data_dir is not None:
                config = BrokerConfig.load(properties, {**overrides,
                                                        "log.dirs": str(home.broker_data)})
    except ConfigError as e:
        fail(str(e))
    install_event_loop()
    hosted: list[HostedService] = []
    if config["schema.registry.listeners"]:
        # _schemas is replicated as the broker's own internal topics are
        from odradek.registry.acls import parse_super_users
        from odradek.registry.hosted import HostedRegistry

        auth_file = config["schema.registry.basic.auth.file"]
        if config["schema.registry.enable.authorization"] and not auth_file:
            fail("schema.registry.enable.authorization needs schema.registry.basic.auth.file: "
                 "the ACLs name its users")
        # _schemas is replicated as the broker's own internal topics are
        hosted.append(HostedRegistry(
            config["schema.registry.listeners"], wait_for_replicas=True,
            topic_replication_factor=int(config["offsets.topic.replication.factor"]),
            basic_auth_file=Path(auth_file) if auth_file else None,
            enable_authorization=bool(config["schema.registry.enable.authorization"]),
            super_users=parse_super_users(config["schema.registry.super.users"] or "")))
    try:
        asyncio.run(run_broker(config, hosted=hosted))
    except OSError as e:
        fail(f"cannot start the broker: {e}")
    except Exception as e:  # the hosted registry could not start (its store, its group)
        if not hosted:
            raise
        fail(f"cannot start the broker's schema registry: {e}")
    except KeyboardInterrupt:
        pass
