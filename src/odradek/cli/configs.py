"""`odradek configs`: describe and alter topic and broker configs (kafka-configs.sh)."""

from __future__ import annotations

from typing import Any

import typer

from odradek.cli.common import BootstrapOption, console, fail, parse_pairs, reported
from odradek.cli.topics import TIMEOUT_S, admin

app = typer.Typer(no_args_is_help=True, help="Describe and alter configs (kafka-configs.sh).")

_SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
}


def _resource(topic: str | None, broker: str | None, ops: list[Any] | None = None) -> Any:
    from confluent_kafka.admin import ConfigResource

    if (topic is None) == (broker is None):
        fail("give exactly one of --topic or --broker")
    if topic is not None:
        return ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=ops)
    return ConfigResource(ConfigResource.Type.BROKER, broker or "", incremental_configs=ops)


@app.command()
def describe(
    topic: str | None = typer.Option(None, "--topic", "-t"),
    broker: str | None = typer.Option(None, "--broker", help="Broker id ('' for the default)"),
    all_: bool = typer.Option(False, "--all", help="Also list configs left at defaults"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Print a topic's or broker's configs."""
    with reported():
        res = _resource(topic, broker)
        client = admin(bootstrap)
        entries = client.describe_configs([res])[res].result(TIMEOUT_S)
        what = f"topic {topic}" if topic else f"broker {broker}"
        print(f"{'All' if all_ else 'Dynamic'} configs for {what} are:")
        for _, e in sorted(entries.items()):
            if not all_ and e.source in (4, 5):
                continue
            print(entry_line(e))


def entry_line(e: Any) -> str:
    """kafka-configs --describe's line for one config entry, with its synonyms."""
    value = "null" if e.value is None else e.value
    synonyms = list(e.synonyms.values()) if getattr(e, "synonyms", None) else [e]
    text = ", ".join(f"{_SOURCES.get(s.source, s.source)}:{s.name}="
                     f"{'null' if s.value is None else s.value}" for s in synonyms)
    return f"  {e.name}={value} sensitive={str(e.is_sensitive).lower()} synonyms={{{text}}}"


@app.command()
def alter(
    topic: str | None = typer.Option(None, "--topic", "-t"),
    broker: str | None = typer.Option(None, "--broker"),
    add_config: list[str] | None = typer.Option(None, "--add-config",
                                                help="k=v[,k=v]; repeatable"),
    delete_config: list[str] | None = typer.Option(None, "--delete-config",
                                                   help="name[,name]; repeatable"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Set or delete configs, leaving the others as they are."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    with reported():
        sets = parse_pairs(add_config)
        deletes = [n.strip() for item in delete_config or [] for n in item.split(",") if n.strip()]
        if not sets and not deletes:
            fail("nothing to change: give --add-config or --delete-config")
        ops = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in sets.items()]
        ops += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                for k in deletes]
        res = _resource(topic, broker, ops)
        client = admin(bootstrap)
        client.incremental_alter_configs([res])[res].result(TIMEOUT_S)
        console.print(f"Completed updating config for {'topic ' + topic if topic else 'broker'}.")
