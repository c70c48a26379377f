"""Broker configuration: Kafka's property names, our safer defaults, and where values come from.

Sources, later ones win: built-in defaults < server.properties < environment variables
(`ODRADEK_LOG_DIRS` for `log.dirs`) < `--override key=value`. Topic-level defaults
(`log.retention.hours`, `log.segment.bytes`, …) are broker properties too; the table
of topic configs lives with the log (storage/log_config.py).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odradek.broker_properties import (
    BROKER_CONFIGS,
    ENV_PREFIX,
    default_data_dir,
)
from odradek.configdef import (
    ConfigError,
    read_properties,
)
from odradek.replication.settings import ReplicaSettings
from odradek.security import AUTHORIZER_PROPERTIES, SASL_PROPERTIES, TLS_PROPERTIES
from odradek.security.authorizer import AclAuthorizer
from odradek.server import inter_broker
from odradek.server.connection_limits import ConnectionLimits
from odradek.server.listener_security import listener_security, no_scram

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int



_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Properties that secure a broker and are not honoured yet: each is refused rather than
# ignored, since a user who sets one asked for a protection they would not get. The
# ones the security layer honours (odradek.security.HONOURED_PROPERTIES: TLS, SASL) are
# kept as given, in `BrokerConfig.security_props`.
_SECURITY_PREFIXES = ("ssl.", "sasl.", "listener.name.", "authorizer.", "quota.",
                      "delegation.token.", "password.encoder.", "principal.builder.",
                      "connection.failed.authentication.", "client.quota.")
_SECURITY_NAMES = frozenset({
    "super.users", "allow.everyone.if.no.acl.found", "security.inter.broker.protocol",
    "inter.broker.listener.name", "control.plane.listener.name",
    "connections.max.reauth.ms",
    "producer.byte.rate", "consumer.byte.rate", "request.percentage",
})
# not honoured yet (moving replicas between log dirs is not throttled), so refused
_REPLICATION_THROTTLES = frozenset({"replica.alter.log.dirs.io.max.bytes.per.second"})
# wired into the listeners and the request pipeline so far
# per listener too (listener.name.<l>.max.connections): connection_limits.py
_CONNECTION_LIMITS = frozenset({"max.connections", "max.connection.creation.rate"})
_WIRED = (TLS_PROPERTIES | SASL_PROPERTIES | AUTHORIZER_PROPERTIES | _CONNECTION_LIMITS
          | inter_broker.PROPERTIES)
AUTHORIZERS = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
               "kafka.security.authorizer.AclAuthorizer", "acl")
_MECHANISMS = ("plain.", "scram-sha-256.", "scram-sha-512.", "oauthbearer.")


def is_honoured_security_property(name: str) -> bool:
    if name in _WIRED:
        return True
    if not name.startswith("listener.name."):
        return False
    rest = name[len("listener.name."):].partition(".")[2]
    for mech in _MECHANISMS:
        if rest.startswith(mech):
            rest = rest[len(mech):]
            return rest in _WIRED or rest == "sasl.jaas.config"
    return rest in _WIRED


def is_security_property(name: str) -> bool:
    return name in _SECURITY_NAMES or name.startswith(_SECURITY_PREFIXES)


def parse_protocol_map(text: str) -> dict[str, str]:
    """`listener.security.protocol.map`: `NAME:PROTOCOL,…` as Kafka writes it."""
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not name.strip() or protocol not in _PROTOCOLS:
            raise ConfigError(
                f"Invalid value {item} in listener.security.protocol.map: expected "
                f"NAME:PROTOCOL with PROTOCOL one of {', '.join(_PROTOCOLS)}")
        out[name.strip().upper()] = protocol
    return out
_LISTENER = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)://(\[[^\]]*\]|[^:]*):(\d+)$")


def parse_listener(text: str) -> Listener:
    m = _LISTENER.match(text.strip())
    if not m:
        raise ConfigError(f"Invalid value {text} for configuration listeners: "
                          "expected NAME://host:port")
    host = m.group(2).strip("[]")
    port = int(m.group(3))
    if not 0 <= port <= 65535:
        raise ConfigError(f"Invalid listener '{text}': port out of range")
    return Listener(m.group(1).upper(), host, port)


def env_properties(environ: Mapping[str, str]) -> dict[str, str]:
    """`ODRADEK_LOG_DIRS=/data` → `log.dirs=/data` for every known property."""
    out: dict[str, str] = {}
    for d in BROKER_CONFIGS:
        key = ENV_PREFIX + d.name.upper().replace(".", "_").replace("-", "_")
        if key in environ:
            out[d.name] = environ[key]
    return out


class BrokerConfig:
    """Parsed broker properties, plus the values changed at runtime (AlterConfigs)."""

    def __init__(self, values: Mapping[str, Any], explicit: Iterable[str] = (),
                 security_props: Mapping[str, str] | None = None) -> None:
        self._values = dict(values)
        # TLS and SASL properties as written (odradek.security reads Kafka's forms)
        self.security_props = dict(security_props or {})
        self.explicit = set(explicit)  # names set in a file, env or override
        self.dynamic: dict[str, Any] = {}

    @classmethod
    def load(
        cls,
        properties_file: Path | None = None,
        overrides: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> BrokerConfig:
        raw: dict[str, str] = {}
        if properties_file is not None:
            raw.update(read_properties(properties_file))
        raw.update(env_properties(os.environ if environ is None else environ))
        raw.update(overrides or {})
        parsed: dict[str, Any] = {d.name: d.default for d in BROKER_CONFIGS}
        security: dict[str, str] = {}
        for name, value in raw.items():
            if name not in BROKER_CONFIGS:
                if is_honoured_security_property(name):
                    security[name] = value
                    continue
                if is_security_property(name):
                    raise ConfigError(
                        f"{name} is not supported by this broker, which will not run "
                        "without a protection you asked for")
                if name in _REPLICATION_THROTTLES:
                    raise ConfigError(f"{name} is not supported yet: moving a replica "
                                      "between log dirs is not throttled")
                log.warning("ignoring unknown broker property %s", name)
                continue
            parsed[name] = BROKER_CONFIGS[name].parse(value)
        config = cls(parsed, explicit=raw.keys(), security_props=security)
        config._check()
        return config

    def _check(self) -> None:
        protocols = self.security_protocols
        for listener in self.listeners + self.advertised_listeners:
            if listener.name not in protocols:
                raise ConfigError(
                    f"No security protocol defined for listener {listener.name}: add it to "
                    "listener.security.protocol.map")
        for listener in self.listeners:
            # builds the listener's TLS context and SASL mechanisms: a keystore that cannot
            # be read, a mechanism without its JAAS entry, … stop the start-up here
            listener_security(self.security_props, listener.name, protocols[listener.name],
                              no_scram)
        authorizer = self.security_props.get("authorizer.class.name", "").strip()
        if authorizer and authorizer not in AUTHORIZERS:
            raise ConfigError(f"authorizer.class.name: {authorizer} is not one this broker "
                              f"runs ({', '.join(AUTHORIZERS)})")
        if authorizer:
            AclAuthorizer.from_config(self.security_props)  # super.users must parse
        # overrides must resolve, per-listener limits parse, per-ip 0 needs overrides
        ConnectionLimits.from_config(self.__getitem__, self.security_props,
                                     [li.name for li in self.listeners])
        # a cluster's brokers reach each other over the inter-broker listener
        if self._values.get("zookeeper.connect") or any(
                p in self.security_props for p in inter_broker.PROPERTIES):
            inter_broker.check(self.security_props,
                               [li.name for li in self.advertised_listeners], protocols)
        registry_settings = [n for n in ("schema.registry.basic.auth.file",
                                         "schema.registry.enable.authorization",
                                         "schema.registry.super.users")
                             if n in self.explicit]
        if registry_settings and not self._values.get("schema.registry.listeners"):
            raise ConfigError(f"{registry_settings[0]}: set for a hosted schema registry, "
                              "but schema.registry.listeners hosts none")
        if self._values.get("schema.registry.listeners") and not any(
                protocols[li.name] == "PLAINTEXT" for li in self.listeners):
            raise ConfigError("schema.registry.listeners: the hosted registry reaches its "
                              "broker through a PLAINTEXT listener, and this broker has none")
        if not self.log_dirs:
            raise ConfigError("log.dirs is empty")
        self._check_memory_pool()
        ReplicaSettings.from_config(self.__getitem__)  # the replica.* combinations

    def _check_memory_pool(self) -> None:
        pool, largest = self["queued.max.request.bytes"], self["socket.request.max.bytes"]
        if "queued.max.request.bytes" not in self.explicit:
            self._values["queued.max.request.bytes"] = max(pool, largest)
        elif 0 < pool < largest:
            raise ConfigError("queued.max.request.bytes must be larger or equal to "
                              "socket.request.max.bytes")

    def __getitem__(self, name: str) -> Any:
        if name in self.dynamic:
            return self.dynamic[name]
        return self._values[name]

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    def values(self) -> dict[str, Any]:
        merged = dict(self._values)
        merged.update(self.dynamic)
        return merged

    def source(self, name: str) -> str:
        if name in self.dynamic:
            return "dynamic"
        if name in self.explicit:
            return "static"
        return "default"

    def levels(self, name: str) -> dict[str, Any]:
        """The property's value at each level that has one: "dynamic" (cluster-wide),
        "static" (file, env or override) and "default" (unset defaults are left out)."""
        out: dict[str, Any] = {}
        if name in self.dynamic:
            out["dynamic"] = self.dynamic[name]
        if name in self.explicit and name in self._values:
            out["static"] = self._values[name]
        if name in BROKER_CONFIGS and BROKER_CONFIGS[name].default is not None:
            out["default"] = BROKER_CONFIGS[name].default
        return out

    @property
    def node_id(self) -> int:
        broker_id = self._values.get("broker.id")
        if broker_id is not None and broker_id >= 0 and "node.id" not in self.explicit:
            return int(broker_id)
        return int(self._values["node.id"])

    @property
    def security_protocols(self) -> dict[str, str]:
        return parse_protocol_map(str(self._values["listener.security.protocol.map"]))

    def security_protocol(self, listener_name: str) -> str:
        return self.security_protocols[listener_name]

    @property
    def inter_broker_listener(self) -> str:
        return inter_broker.listener_name(self.security_props)

    @property
    def listeners_raw(self) -> list[str]:
        return list(self._values["listeners"])

    @property
    def listeners(self) -> list[Listener]:
        return [parse_listener(t) for t in self.listeners_raw]

    @property
    def advertised_listeners(self) -> list[Listener]:
        raw = self._values.get("advertised.listeners")
        if not raw:
            return [
                Listener(li.name, li.host or "localhost", li.port)
                if li.host not in ("", "0.0.0.0", "::")
                else Listener(li.name, "localhost", li.port)
                for li in self.listeners
            ]
        return [parse_listener(t) for t in raw]

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self._values.get("log.dirs")
        if dirs:
            return [Path(d).expanduser() for d in dirs]
        single = self._values.get("log.dir")
        if single:
            return [Path(single).expanduser()]
        return [default_data_dir()]

    def warnings(self) -> list[str]:
        """Risky settings, each with the reason it is risky."""
        out: list[str] = []
        for d in self.log_dirs:
            if str(d.resolve()).startswith("/tmp") or str(d).startswith("/tmp"):
                out.append(f"log.dirs includes {d}: /tmp is wiped on reboot, data will be lost")
        if self["auto.create.topics.enable"]:
            out.append("auto.create.topics.enable=true: a typo in a topic name creates a topic")
        if self["unclean.leader.election.enable"]:
            out.append(
                "unclean.leader.election.enable=true: an out-of-sync replica may lead and "
                "acknowledged writes can be lost"
            )
        retention_h = self["log.retention.hours"]
        if (self.get("log.retention.ms") is None and self.get("log.retention.minutes") is None
                and retention_h is not None and retention_h > 24 * 7):
            out.append(
                f"log.retention.hours={retention_h}: more than 7 days of data per "
                "partition; make sure the disks can hold it"
            )
        if self["log.flush.interval.messages"] == 1:
            out.append(
                "log.flush.interval.messages=1: an fsync per message batch before each "
                "acknowledgement (milliseconds each on most disks; see docs/durability.md)"
            )
        return out
