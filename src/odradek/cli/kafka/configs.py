"""`odradek kafka-configs`: Kafka's kafka-configs.sh (ConfigCommand) for topics, brokers,
the client quotas of users and clients (cli/client_quotas.py) and the SCRAM
credentials of users (cli/scram_users.py; with `--zookeeper`, offline, as Kafka's
tool creates the first admin before any broker runs).

ips, broker loggers, client metrics and groups are refused with a one-line error:
refusing beats accepting what is not done.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from odradek.cli import client_quotas as cq
from odradek.cli import scram_users
from odradek.cli.client_quotas import QuotaError
from odradek.cli.configs import entry_line
from odradek.cli.kafka.client import (
    TIMEOUT_S,
    ToolError,
    admin,
    client_conf,
    load_properties,
    message_of,
)
from odradek.cli.kafka.jopt import OptionError, Parsed, Parser, check_invalid, help_or_version
from odradek.cli.kafka.jopt import usage_and_exit as _usage

_TYPES = ("topics", "clients", "users", "brokers", "broker-loggers", "ips", "client-metrics",
          "groups")
_SUPPORTED = ("topics", "brokers", "users", "clients")
_DYNAMIC_SOURCE = {"topics": 1, "brokers": 2, "": 3}  # ConfigSource of the entity's own configs
_SPLIT = re.compile(r",(?=[^\]]*(?:\[|$))")  # commas outside [...]


class _Options:
    def __init__(self) -> None:
        p = self.parser = Parser()
        self.bootstrap = p.option("bootstrap-server", "The Kafka servers to connect to.",
                                  "server to connect to")
        self.bootstrap_controller = p.option("bootstrap-controller",
                                             "The Kafka controllers to connect to.",
                                             "controller to connect to")
        self.zookeeper = p.option("zookeeper", "The ZooKeeper connection string, for SCRAM "
                                  "credentials of users only (before the brokers run).",
                                  "urls")
        self.command_config = p.option("command-config", "Property file containing configs to "
                                       "be passed to Admin Client.", "command config property file")
        self.alter = p.flag("alter", "Alter the configuration for the entity.")
        self.describe = p.flag("describe", "List configs for the given entity.")
        self.all = p.flag("all", "List all configs for the given entity, including static "
                          "configs if available.")
        self.entity_type = p.option("entity-type", "Type of entity (topics/clients/users/"
                                    "brokers/broker-loggers/ips/client-metrics/groups)",
                                    "entity-type")
        self.entity_name = p.option("entity-name", "Name of entity (topic name/client id/user "
                                    "principal name/broker id/ip/client metrics/group id)",
                                    "entity-name")
        self.entity_default = p.flag("entity-default", "Default entity name for clients/users/"
                                     "brokers/ips (applies to corresponding entity type)")
        self.add_config = p.option("add-config", "Key Value pairs of configs to add. Square "
                                   "brackets can be used to group values which contain commas: "
                                   "'k1=v1,k2=[v1,v2,v2],k3=v3'.", "add-config")
        self.add_config_file = p.option("add-config-file", "Path to a properties file with "
                                        "configs to add.", "add-config-file")
        self.delete_config = p.option("delete-config", "config keys to remove 'k1,k2'",
                                      "delete-config")
        self.force = p.flag("force", "Suppress console prompts")
        self.topic = p.option("topic", "The topic's name.", "topic")
        self.client = p.option("client", "The client's ID.", "client")
        self.client_defaults = p.flag("client-defaults", "The config defaults for all clients.")
        self.user = p.option("user", "The user's principal name.", "user")
        self.user_defaults = p.flag("user-defaults", "The config defaults for all users.")
        self.broker = p.option("broker", "The broker's ID.", "broker")
        self.broker_defaults = p.flag("broker-defaults", "The config defaults for all brokers.")
        self.broker_logger = p.option("broker-logger", "The broker's ID for its logger config.",
                                      "broker-logger")
        self.ip_defaults = p.flag("ip-defaults", "The config defaults for all IPs.")
        self.ip = p.option("ip", "The IP address.", "ip")
        self.group = p.option("group", "The group's ID.", "group")
        self.client_metrics = p.option("client-metrics", "The client metrics config resource "
                                       "name.", "client-metrics")
        self.flags = [(self.topic, "topics"), (self.client, "clients"), (self.user, "users"),
                      (self.broker, "brokers"), (self.broker_logger, "broker-loggers"),
                      (self.ip, "ips"), (self.client_metrics, "client-metrics"),
                      (self.group, "groups")]
        self.default_flags = [(self.client_defaults, "clients"), (self.user_defaults, "users"),
                              (self.broker_defaults, "brokers"), (self.ip_defaults, "ips")]

    def entities(self, o: Parsed) -> tuple[list[str], list[str]]:
        """(entity types, entity names; '' for a default entity), as ConfigCommand pairs them."""
        types = o.all(self.entity_type)
        names = o.all(self.entity_name) + ([""] if o.has(self.entity_default) else [])
        for spec, kind in self.flags:
            for value in o.all(spec):
                types.append(kind)
                names.append(value)
        for spec, kind in self.default_flags:
            if o.has(spec):
                types.append(kind)
                names.append("")
        return types, names

    def check(self, o: Parsed) -> None:
        p = self.parser
        if sum(o.has(a) for a in (self.alter, self.describe)) != 1:
            _usage(p, "Command must include exactly one action: --describe, --alter")
        check_invalid(p, o, self.alter, self.describe)
        check_invalid(p, o, self.describe, self.alter, self.add_config, self.delete_config)
        types, names = self.entities(o)
        dups = sorted({t for t in types if types.count(t) > 1})
        if dups:
            raise ValueError(f"Duplicate entity type(s) specified: {','.join(dups)}")
        for t in types:
            if t not in _TYPES:
                raise ValueError(f"Invalid entity type {t}, the entity type must be one of "
                                 f"{', '.join(_TYPES)} with a --bootstrap-server or "
                                 "--bootstrap-controller argument")
        if not types:
            raise ValueError("At least one entity type must be specified")
        if len(types) > 1 and set(types) != {"users", "clients"}:
            raise ValueError("Only 'users' and 'clients' entity types may be specified together")
        specific = [s for s, _ in self.flags + self.default_flags]
        if (o.has(self.entity_name) or o.has(self.entity_type) or o.has(self.entity_default)) \
                and any(o.has(s) for s in specific):
            raise ValueError("--entity-{type,name,default} should not be used in conjunction "
                             "with specific entity flags")
        connects = o.has(self.bootstrap) + o.has(self.bootstrap_controller) + \
            o.has(self.zookeeper)
        if connects == 0:
            raise ValueError("One of the required --bootstrap-server, --boostrap-controller, or "
                             "--zookeeper arguments must be specified")
        if connects > 1:
            raise ValueError("Only one of --bootstrap-server, --boostrap-controller, and "
                             "--zookeeper can be specified")
        has_name = any(names)
        if has_name and types[0] in ("brokers", "broker-loggers"):
            for n in names:
                if n and not n.lstrip("-").isdigit():
                    raise ValueError(f"The entity name for {types[0]} must be a valid integer "
                                     f"broker id, but it is: {n}")
        if o.has(self.describe) and o.has(self.entity_default) \
                and not {"users", "clients", "brokers", "ips"} & set(types):
            raise ValueError("--entity-default must not be specified with --describe of "
                             + ",".join(types))
        if o.has(self.alter):
            if {"users", "clients", "brokers", "ips"} & set(types):
                if not names:
                    raise ValueError("An entity-name or default entity must be specified with "
                                     "--alter of users, clients, brokers or ips")
            elif not has_name:
                raise ValueError("An entity name must be specified with --alter of "
                                 + ",".join(types))
            if o.has(self.add_config) and o.has(self.add_config_file):
                raise ValueError("Only one of --add-config or --add-config-file must be "
                                 "specified")
            if not (o.has(self.add_config) or o.has(self.add_config_file)
                    or o.has(self.delete_config)):
                raise ValueError("At least one of --add-config, --add-config-file, or "
                                 "--delete-config must be specified with --alter")
        unsupported = [t for t in types if t not in _SUPPORTED]
        if unsupported:
            raise ValueError(f"odradek does not support --entity-type {unsupported[0]} yet "
                             "(topics, brokers, users and clients only)")


def main(argv: list[str]) -> None:
    spec = _Options()
    try:
        opts = spec.parser.parse(argv)
        help_or_version(spec.parser, opts, "This tool helps to manipulate and describe entity "
                        "config for a topic, client, user, broker, ip, client-metrics or group")
        spec.check(opts)
        types, names = spec.entities(opts)
        if opts.has(spec.zookeeper) and not _scram_only(spec, opts, types):
            raise ValueError("--zookeeper is only for SCRAM credentials of users (the first "
                             "admin, before the brokers run); use --bootstrap-server")
        if types[0] == "users" and opts.has(spec.alter) and _scram_only(spec, opts, types):
            _scram(spec, opts, names)
            return
        if types[0] in ("users", "clients"):
            _quotas(spec, opts, types, names)
            return
        client = admin(client_conf(opts.value(spec.bootstrap), opts.all(spec.command_config)))
        if opts.has(spec.describe):
            _describe(client, types[0], names[0] if names else None, opts.has(spec.all))
        else:
            _alter(client, spec, opts, types[0], names[0])
    except (OptionError, ValueError, ToolError, QuotaError, scram_users.ScramError) as e:
        print(e, file=sys.stderr)
        sys.exit(1)
    except Exception as e:  # confluent-kafka's KafkaException
        if type(e).__name__ != "KafkaException":
            raise
        print(f"Error while executing config command with args '{' '.join(argv)}'",
              file=sys.stderr)
        print(message_of(e), file=sys.stderr)
        sys.exit(1)


def _resource(kind: str, name: str, ops: list[Any] | None = None) -> Any:
    from confluent_kafka.admin import ConfigResource

    rtype = ConfigResource.Type.TOPIC if kind == "topics" else ConfigResource.Type.BROKER
    return ConfigResource(rtype, name, incremental_configs=ops)


def _entries(client: Any, kind: str, name: str) -> dict[str, Any]:
    res = _resource(kind, name)
    result: dict[str, Any] = client.describe_configs([res], request_timeout=TIMEOUT_S)[res] \
        .result(TIMEOUT_S)
    return result


def _describe(client: Any, kind: str, name: str | None, describe_all: bool) -> None:
    if name is not None:
        entities = [name]
    elif kind == "topics":
        entities = sorted(client.list_topics(timeout=TIMEOUT_S).topics)
    else:
        nodes = client.describe_cluster(request_timeout=TIMEOUT_S).result(TIMEOUT_S).nodes
        entities = [str(n.id) for n in nodes] + [""]
    for entity in entities:
        if entity == "":
            print(f"Default configs for {kind} in the cluster are:")
        else:
            print(f"{'All' if describe_all else 'Dynamic'} configs for {kind[:-1]} {entity} are:")
        source = _DYNAMIC_SOURCE["" if entity == "" else kind]
        for _, e in sorted(_entries(client, kind, entity).items()):
            if describe_all or e.source == source:
                print(entry_line(e))


def _to_add(spec: _Options, opts: Parsed) -> dict[str, str]:
    out: dict[str, str] = {}
    for path in opts.all(spec.add_config_file)[:1]:
        out.update(load_properties(path))
    text = opts.value(spec.add_config)
    if text:
        for pair in _SPLIT.split(text):
            key, sep, value = pair.partition("=")
            if not sep:
                raise ValueError(f"requirement failed: Invalid entity config: all configs to be "
                                 f"added must be in the format \"key=val\": {pair}")
            out[key.strip()] = value.strip().removeprefix("[").removesuffix("]")
    return out


def _alter(client: Any, spec: _Options, opts: Parsed, kind: str, name: str) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    sets = _to_add(spec, opts)
    # withValuesSeparatedBy(','): repeatable, and each value a comma-separated list
    deletes = [k.strip() for item in opts.all(spec.delete_config) for k in item.split(",")
               if k.strip()]
    source = _DYNAMIC_SOURCE["" if name == "" else kind]
    current = {k for k, e in _entries(client, kind, name).items() if e.source == source}
    missing = [k for k in deletes if k not in current]
    if missing:
        raise ValueError(f"Invalid config(s): {','.join(missing)}")
    ops = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sets.items()]
    ops += [ConfigEntry(k, "", incremental_operation=AlterConfigOpType.DELETE) for k in deletes]
    res = _resource(kind, name, ops)
    client.incremental_alter_configs([res], request_timeout=TIMEOUT_S)[res].result(TIMEOUT_S)
    if name:
        print(f"Completed updating config for {kind[:-1]} {name}.")
    else:
        print(f"Completed updating default config for {kind} in the cluster.")


def _scram_only(spec: _Options, opts: Parsed, types: list[str]) -> bool:
    """An --alter of a user that touches SCRAM credentials and nothing else."""
    if types != ["users"] or not opts.has(spec.alter):
        return False
    keys = list(_to_add(spec, opts)) + _deletes(spec, opts)
    return bool(keys) and all(scram_users.is_scram(k) for k in keys)


def _deletes(spec: _Options, opts: Parsed) -> list[str]:
    return [k.strip() for item in opts.all(spec.delete_config) for k in item.split(",")
            if k.strip()]


def _scram(spec: _Options, opts: Parsed, names: list[str]) -> None:
    """ConfigCommand's SCRAM alterations: online (AlterUserScramCredentials) or, with
    --zookeeper, written to /config/users/<user> directly."""
    if not names or not names[0]:
        raise ValueError("SCRAM credentials need a user: --entity-name (not the default)")
    upserts = scram_users.parse_upserts(_to_add(spec, opts))
    deletes = scram_users.parse_deletes(_deletes(spec, opts))
    if opts.has(spec.zookeeper):
        scram_users.alter_offline(opts.value(spec.zookeeper) or "", names[0], upserts, deletes)
    else:
        scram_users.alter_online(client_conf(opts.value(spec.bootstrap),
                                             opts.all(spec.command_config)),
                                 names[0], upserts, deletes)
    print(f"Completed updating config for user {names[0]}.")


def _quotas(spec: _Options, opts: Parsed, types: list[str], names: list[str]) -> None:
    """ConfigCommand's alter and describe of client quotas (users, clients, both)."""
    if opts.has(spec.command_config):
        raise ValueError("odradek kafka-configs does not take --command-config for users and "
                         "clients yet (their quotas go over PLAINTEXT)")
    bootstrap = opts.value(spec.bootstrap) or ""
    if opts.has(spec.describe):
        for entity, values in cq.describe(bootstrap, types, names):
            print(cq.describe_line(entity, values))
        return
    sets = _to_add(spec, opts)
    scram = [k for k in sets if scram_users.is_scram(k)]
    if scram:
        raise ValueError(f"{scram[0]}: alter SCRAM credentials apart from quotas (one "
                         "--alter for each)")
    deletes = [k.strip() for item in opts.all(spec.delete_config) for k in item.split(",")
               if k.strip()]
    if len(names) != len(types):
        raise ValueError("An entity-name or default entity must be specified with --alter "
                         "of users, clients, brokers or ips")
    current = {k for _, values in cq.describe(bootstrap, types, names) for k in values}
    missing = [k for k in deletes if k not in current]
    if missing:
        raise ValueError(f"Invalid config(s): {','.join(missing)}")
    cq.alter(bootstrap, cq.entity_of(types, names), cq.parse_values(sets), deletes)
    if names[0]:
        print(f"Completed updating config for {types[0][:-1]} {names[0]}.")
    else:
        print(f"Completed updating default config for {types[0]} in the cluster.")
