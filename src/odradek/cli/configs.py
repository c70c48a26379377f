"""`odradek configs`: describe and alter topic and broker configs, client quotas of
users and client ids (kafka-configs.sh: --entity-type users|clients), and users' SCRAM
credentials (`--add-config 'SCRAM-SHA-512=[password=…]'`; with --zookeeper, offline,
before any broker runs)."""

from __future__ import annotations

import re
from pathlib import Path
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


EntityTypeOption = typer.Option(
    None, "--entity-type", help="users or clients (client quotas); twice for both")
EntityNameOption = typer.Option(
    None, "--entity-name", help="The user or client id, in --entity-type's order")
EntityDefaultOption = typer.Option(
    False, "--entity-default", help="The <default> entity of the last --entity-type")


def _quota_entity(types: list[str] | None, names: list[str] | None,
                  default: bool) -> tuple[list[str], list[str]] | None:
    """(types, names with '' for the default) when client quotas are meant."""
    if not types:
        if names or default:
            fail("--entity-name and --entity-default need --entity-type users|clients")
        return None
    for t in types:
        if t not in ("users", "clients"):
            fail(f"--entity-type {t}: only users and clients here (use --topic or --broker)")
    if len(types) != len(set(types)):
        fail("Duplicate entity type(s) specified")
    all_names = list(names or []) + ([""] if default else [])
    if len(all_names) > len(types):
        fail("more entity names than entity types")
    return list(types), all_names


@app.command()
def describe(
    topic: str | None = typer.Option(None, "--topic", "-t"),
    broker: str | None = typer.Option(None, "--broker", help="Broker id ('' for the default)"),
    entity_type: list[str] | None = EntityTypeOption,
    entity_name: list[str] | None = EntityNameOption,
    entity_default: bool = EntityDefaultOption,
    all_: bool = typer.Option(False, "--all", help="Also list configs left at defaults"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Print a topic's or broker's configs, or users' and clients' quotas."""
    with reported():
        quota = _quota_entity(entity_type, entity_name, entity_default)
        if quota is not None:
            from odradek.cli import client_quotas as cq

            try:
                found = cq.describe(bootstrap, quota[0], quota[1])
            except cq.QuotaError as refused:
                fail(str(refused))
            for entity, values in found:
                print(cq.describe_line(entity, values))
            return
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
    entity_type: list[str] | None = EntityTypeOption,
    entity_name: list[str] | None = EntityNameOption,
    entity_default: bool = EntityDefaultOption,
    add_config: list[str] | None = typer.Option(None, "--add-config",
                                                help="k=v[,k=v]; repeatable"),
    delete_config: list[str] | None = typer.Option(None, "--delete-config",
                                                   help="name[,name]; repeatable"),
    zookeeper: str | None = typer.Option(
        None, "--zookeeper", help="SCRAM credentials only: write them to this ZooKeeper "
        "(host:port[/chroot]) directly, e.g. the first admin before the brokers start"),
    command_config: Path | None = typer.Option(
        None, "--command-config", help="Client properties (security settings) for SCRAM"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Set or delete configs, leaving the others as they are."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    with reported():
        if any(s.strip().upper().startswith("SCRAM-")
               for item in [*(add_config or []), *(delete_config or [])]
               for s in _SPLIT.split(item)):
            _alter_scram(entity_type, entity_name, add_config, delete_config, zookeeper,
                         command_config, bootstrap)
            return
        if zookeeper is not None:
            fail("--zookeeper is only for SCRAM credentials of users")
        sets = parse_pairs(add_config)
        deletes = [n.strip() for item in delete_config or [] for n in item.split(",") if n.strip()]
        if not sets and not deletes:
            fail("nothing to change: give --add-config or --delete-config")
        quota = _quota_entity(entity_type, entity_name, entity_default)
        if quota is not None:
            _alter_quotas(bootstrap, quota[0], quota[1], sets, deletes)
            return
        ops = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in sets.items()]
        ops += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                for k in deletes]
        res = _resource(topic, broker, ops)
        client = admin(bootstrap)
        client.incremental_alter_configs([res])[res].result(TIMEOUT_S)
        console.print(f"Completed updating config for {'topic ' + topic if topic else 'broker'}.")


_SPLIT = re.compile(r",(?=[^\]]*(?:\[|$))")  # commas outside [...]


def _alter_scram(types: list[str] | None, names: list[str] | None, adds: list[str] | None,
                 deletes: list[str] | None, zookeeper: str | None, command_config: Path | None,
                 bootstrap: str) -> None:
    from odradek.cli import scram_users
    from odradek.cli.common import client_config
    from odradek.cli.console import read_client_config

    if types != ["users"] or not names or len(names) != 1:
        fail("SCRAM credentials belong to one user: --entity-type users --entity-name NAME")
    sets: dict[str, str] = {}
    for item in adds or []:
        for pair in _SPLIT.split(item):
            key, sep, value = pair.partition("=")
            if not sep:
                fail(f"invalid config '{pair}': expected key=value")
            sets[key.strip()] = value.strip()
    keys = [k.strip() for item in deletes or [] for k in item.split(",") if k.strip()]
    if not all(scram_users.is_scram(k) for k in [*sets, *keys]):
        fail("alter SCRAM credentials apart from quotas (one alter for each)")
    try:
        upserts = scram_users.parse_upserts(sets)
        removed = scram_users.parse_deletes(keys)
        if zookeeper is not None:
            scram_users.alter_offline(zookeeper, names[0], upserts, removed)
        else:
            conf = client_config(bootstrap)
            if command_config is not None:
                conf = {**read_client_config(command_config), **conf}
            scram_users.alter_online(conf, names[0], upserts, removed)
    except scram_users.ScramError as e:
        fail(str(e))
    console.print(f"Completed updating config for user {names[0]}.")


def _alter_quotas(bootstrap: str, types: list[str], names: list[str], sets: dict[str, str],
                  deletes: list[str]) -> None:
    from odradek.cli import client_quotas as cq

    if len(names) != len(types):
        fail("An entity-name or default entity must be specified with --alter of users, "
             "clients, brokers or ips")
    try:
        entity = cq.entity_of(types, names)
        current = {k for _, values in cq.describe(bootstrap, types, names) for k in values}
        missing = [k for k in deletes if k not in current]
        if missing:
            fail(f"Invalid config(s): {','.join(missing)}")
        cq.alter(bootstrap, entity, cq.parse_values(sets), deletes)
    except cq.QuotaError as refused:
        fail(str(refused))
    if names[0]:
        console.print(f"Completed updating config for {types[0][:-1]} {names[0]}.")
    else:
        console.print(f"Completed updating default config for {types[0]} in the cluster.")
