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

from odradek.configdef import (
    LONG_MAX,
    ConfigDef,
    ConfigError,
    ConfigTable,
    ConfigType,
    read_properties,
)
from odradek.home import Home
from odradek.replication.settings import ReplicaSettings
from odradek.security import AUTHORIZER_PROPERTIES, SASL_PROPERTIES, TLS_PROPERTIES
from odradek.security.authorizer import AclAuthorizer
from odradek.server.connection_limits import ConnectionLimits
from odradek.server.listener_security import listener_security, no_scram
from odradek.storage.log_config import BROKER_SYNONYMS, TOPIC_CONFIGS

log = logging.getLogger(__name__)

_T = ConfigType
ENV_PREFIX = "ODRADEK_"


MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


def _migration_policy(value: Any) -> str | None:
    # Kafka's CaseInsensitiveValidString over ConsumerGroupMigrationPolicy
    if str(value).lower() in MIGRATION_POLICIES:
        return None
    return f"String must be one of (case insensitive): {', '.join(MIGRATION_POLICIES)}"


_REGISTRY_LISTENER = re.compile(r"^http://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]*):(\d{1,5})$")


def registry_listener_problem(value: Any) -> str | None:
    """`schema.registry.listeners`: one http://host:port (the registry serves one)."""
    if not str(value).strip():
        return None  # empty: unset
    m = _REGISTRY_LISTENER.match(str(value).strip())
    if m is None or int(m.group(2)) > 65535:
        return "expected one http://host:port (https and several listeners are not served)"
    return None


def default_data_dir() -> Path:
    """A durable place for data: data/ in the data home (odradek/home.py), never /tmp."""
    return Home.at().broker_data


def _broker_topic_defaults() -> list[ConfigDef]:
    """Broker-level properties that give topic configs their defaults."""
    defs: list[ConfigDef] = []
    for topic_name, synonyms in BROKER_SYNONYMS.items():
        topic_def = TOPIC_CONFIGS[topic_name]
        for i, (prop, multiplier) in enumerate(synonyms):
            if prop in _NOT_TOPIC_SYNONYM_DEFS:
                continue
            default: Any = None
            kafka_default = None
            why = ""
            if i == len(synonyms) - 1:
                # the least specific synonym carries the default value
                default = topic_def.default
                if multiplier != 1 and isinstance(default, int) and default > 0:
                    default //= multiplier
                kafka_default = topic_def.kafka_default
                if multiplier != 1 and isinstance(kafka_default, int):
                    kafka_default //= multiplier
                why = topic_def.why_different
            typ = topic_def.type
            if multiplier != 1:
                typ = _T.INT if prop.endswith("hours") or prop.endswith("minutes") else _T.LONG
            defs.append(
                ConfigDef(prop, typ, default, topic_def.doc, minimum=topic_def.minimum,
                          maximum=topic_def.maximum, choices=topic_def.choices,
                          kafka_default=kafka_default, why_different=why)
            )
    return defs


# Broker properties that are also topic-config synonyms but defined below with their own docs.
_NOT_TOPIC_SYNONYM_DEFS = {
    "compression.type",
    "min.insync.replicas",
    "unclean.leader.election.enable",
    "message.max.bytes",
}

BROKER_CONFIGS = ConfigTable(
    [
        ConfigDef("node.id", _T.INT, 1, "This broker's id.", minimum=0, read_only=True),
        ConfigDef("broker.id", _T.INT, None, "Old name of node.id.", minimum=-1, read_only=True),
        ConfigDef("listeners", _T.LIST, ["PLAINTEXT://localhost:9092"],
                  "Addresses to listen on, e.g. PLAINTEXT://0.0.0.0:9092.",
                  kafka_default=["PLAINTEXT://:9092"], read_only=True,
                  why_different="Listen on loopback until told otherwise."),
        ConfigDef("advertised.listeners", _T.LIST, None,
                  "Addresses clients are told to use; defaults to listeners.", read_only=True),
        ConfigDef("listener.security.protocol.map", _T.STRING,
                  "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
                  "Listener name to security protocol.", read_only=True),
        ConfigDef("log.dirs", _T.LIST, None, "Directories holding the partitions' data.",
                  read_only=True, kafka_default=["/tmp/kafka-logs"],
                  why_different="/tmp is wiped on reboot; ours is data/ in $ODRADEK_HOME."),
        ConfigDef("log.dir", _T.STRING, None, "Single log directory (if log.dirs unset).",
                  read_only=True),
        ConfigDef("cluster.id", _T.STRING, None,
                  "Cluster id for a new data dir; generated when unset.", read_only=True),
        ConfigDef("broker.rack", _T.STRING, None, "Rack of this broker.", read_only=True),
        ConfigDef("num.partitions", _T.INT, 1, "Default partitions of a new topic.", minimum=1),
        ConfigDef("default.replication.factor", _T.INT, 1,
                  "Default replication factor of a new topic.", minimum=1),
        ConfigDef("auto.create.topics.enable", _T.BOOLEAN, False,
                  "Create a topic when a client asks for its metadata.", kafka_default=True,
                  why_different="Typos create topics silently; our users turn it off."),
        ConfigDef("delete.topic.enable", _T.BOOLEAN, True, "Allow deleting topics."),
        ConfigDef("message.max.bytes", _T.INT, 1048588, "Largest record batch accepted.",
                  minimum=0),
        ConfigDef("max.request.partition.size.limit", _T.INT, 2000,
                  "Most partitions a DescribeTopicPartitions response holds.", minimum=1),
        ConfigDef("telemetry.max.bytes", _T.INT, 1048576,
                  "Largest client metrics payload a PushTelemetry may carry.", minimum=1),
        ConfigDef("compression.type", _T.STRING, "producer", "Final compression of batches.",
                  choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
        ConfigDef("min.insync.replicas", _T.INT, 1,
                  "Replicas that must acknowledge an acks=all write.", minimum=1),
        ConfigDef("unclean.leader.election.enable", _T.BOOLEAN, False,
                  "Let an out-of-sync replica lead (fast recovery, loses data)."),
        ConfigDef("log.retention.check.interval.ms", _T.LONG, 300_000,
                  "How often retention runs.", minimum=1),
        ConfigDef("log.cleaner.enable", _T.BOOLEAN, True,
                  "Run the log cleaner, which compacts cleanup.policy=compact topics.",
                  read_only=True),
        ConfigDef("log.cleaner.threads", _T.INT, 1,
                  "Threads compacting logs; 0 runs no cleaner.", minimum=0, read_only=True),
        ConfigDef("log.cleaner.dedupe.buffer.size", _T.LONG, 134_217_728,
                  "Memory for the cleaners' key → offset maps, shared by all threads.",
                  minimum=1, read_only=True),
        ConfigDef("log.cleaner.io.buffer.size", _T.INT, 524_288,
                  "Read and write buffers of the cleaner threads, shared by all threads.",
                  minimum=0, read_only=True),
        ConfigDef("log.cleaner.io.max.bytes.per.second", _T.DOUBLE, 1.7976931348623157e308,
                  "Cap on the cleaners' combined read and write rate.", minimum=0,
                  read_only=True),
        ConfigDef("log.cleaner.backoff.ms", _T.LONG, 15_000,
                  "How long a cleaner thread sleeps when no log needs cleaning.", minimum=0,
                  read_only=True),
        ConfigDef("log.flush.scheduler.interval.ms", _T.LONG, 1000,
                  "How often logs are checked for flush.ms.", minimum=1,
                  kafka_default=LONG_MAX,
                  why_different="So that flush.ms is honoured without a restart."),
        ConfigDef("log.flush.offset.checkpoint.interval.ms", _T.INT, 60_000,
                  "How often recovery points are checkpointed.", minimum=0),
        ConfigDef("log.flush.start.offset.checkpoint.interval.ms", _T.INT, 60_000,
                  "How often log start offsets are checkpointed.", minimum=0),
        ConfigDef("replica.high.watermark.checkpoint.interval.ms", _T.LONG, 5000,
                  "How often high watermarks are checkpointed.", minimum=1),
        ConfigDef("replica.lag.time.max.ms", _T.LONG, 30_000,
                  "A follower that has not caught up for this long leaves the ISR.",
                  minimum=1, read_only=True),
        ConfigDef("num.replica.fetchers", _T.INT, 1,
                  "Fetcher tasks per source broker replicating its partitions.", minimum=1,
                  read_only=True),
        ConfigDef("replica.fetch.max.bytes", _T.INT, 1_048_576,
                  "Bytes a follower asks for per partition in one fetch.", minimum=0,
                  read_only=True),
        ConfigDef("replica.fetch.response.max.bytes", _T.INT, 10_485_760,
                  "Bytes a follower asks for in one whole fetch.", minimum=0, read_only=True),
        ConfigDef("replica.fetch.wait.max.ms", _T.INT, 500,
                  "Longest a follower's fetch waits at the leader for data.", minimum=0,
                  read_only=True),
        ConfigDef("replica.fetch.min.bytes", _T.INT, 1,
                  "Bytes a follower's fetch waits for at the leader.", minimum=1,
                  read_only=True),
        ConfigDef("replica.fetch.backoff.ms", _T.INT, 1000,
                  "Pause of a follower's fetcher after an error.", minimum=0, read_only=True),
        ConfigDef("replica.socket.timeout.ms", _T.INT, 30_000,
                  "Socket timeout of a follower's requests to the leader.", minimum=1,
                  read_only=True),
        ConfigDef("replica.socket.receive.buffer.bytes", _T.INT, 65_536,
                  "SO_RCVBUF of a follower's connections to leaders (-1: the OS's).",
                  minimum=-1, read_only=True),
        ConfigDef("replica.selector.class", _T.STRING, None,
                  "Picks the replica a consumer with client.rack reads from (KIP-392): "
                  "org.apache.kafka.common.replica.RackAwareReplicaSelector, or unset for "
                  "the leader.", read_only=True),
        ConfigDef("num.recovery.threads.per.data.dir", _T.INT, 2,
                  "Threads per log dir for recovery at start-up.", minimum=1),
        ConfigDef("producer.id.expiration.ms", _T.INT, 86_400_000,
                  "Idle time after which a producer id's state is dropped.", minimum=1),
        ConfigDef("socket.request.max.bytes", _T.INT, 104_857_600,
                  "Largest request accepted.", minimum=1),
        ConfigDef("connections.max.idle.ms", _T.LONG, 600_000,
                  "Idle connections are closed after this long.", minimum=1),
        ConfigDef("max.connections", _T.INT, 2**31 - 1,
                  "Connections the broker keeps at once; more are closed at once.",
                  minimum=0, read_only=True),
        ConfigDef("max.connections.per.ip", _T.INT, 2**31 - 1,
                  "Connections one address may hold; more are closed at once.", minimum=0,
                  read_only=True),
        ConfigDef("max.connections.per.ip.overrides", _T.STRING, "",
                  "Per-address limits, host:count,…, over max.connections.per.ip.",
                  read_only=True),
        ConfigDef("max.connection.creation.rate", _T.INT, 2**31 - 1,
                  "New connections per second the broker serves; more wait their turn.",
                  minimum=0, read_only=True),
        ConfigDef("quota.window.num", _T.INT, 11,
                  "Samples kept for client quota rates.", minimum=1, read_only=True),
        ConfigDef("quota.window.size.seconds", _T.INT, 1,
                  "Time span of one client quota sample.", minimum=1, read_only=True),
        ConfigDef("queued.max.requests", _T.INT, 500,
                  "Requests queued per connection before reading pauses.", minimum=1),
        ConfigDef("request.timeout.ms", _T.INT, 30_000, "Longest a request may wait.",
                  minimum=0),
        ConfigDef("offsets.topic.num.partitions", _T.INT, 50,
                  "Partitions of __consumer_offsets.", minimum=1, read_only=True),
        ConfigDef("offsets.topic.replication.factor", _T.INT, 1,
                  "Replication factor of __consumer_offsets; with ZooKeeper, FindCoordinator "
                  "answers COORDINATOR_NOT_AVAILABLE until this many brokers are alive.",
                  minimum=1, kafka_default=3,
                  why_different="A single embedded broker cannot hold 3 copies."),
        ConfigDef("offsets.topic.segment.bytes", _T.INT, 104_857_600,
                  "Segment size of __consumer_offsets.", minimum=1),
        ConfigDef("offsets.commit.timeout.ms", _T.INT, 5000,
                  "How long a commit (and a transaction state write) waits for every "
                  "in-sync replica of its partition.", minimum=1),
        ConfigDef("offsets.retention.minutes", _T.INT, 10080,
                  "How long offsets of an empty group are kept.", minimum=1),
        ConfigDef("offsets.retention.check.interval.ms", _T.LONG, 600_000,
                  "How often stale offsets are removed.", minimum=1),
        ConfigDef("offset.metadata.max.bytes", _T.INT, 4096,
                  "Largest metadata string of a committed offset.", minimum=0),
        ConfigDef("group.initial.rebalance.delay.ms", _T.INT, 3000,
                  "Wait for more members before the first rebalance of a new group.",
                  minimum=0),
        ConfigDef("group.min.session.timeout.ms", _T.INT, 6000,
                  "Smallest session.timeout.ms a member may ask for.", minimum=0),
        ConfigDef("group.max.session.timeout.ms", _T.INT, 1_800_000,
                  "Largest session.timeout.ms a member may ask for.", minimum=0),
        ConfigDef("group.max.size", _T.INT, 2_147_483_647, "Most members in a group.",
                  minimum=1),
        ConfigDef("group.coordinator.rebalance.protocols", _T.LIST, ["classic", "consumer"],
                  "Group protocols enabled.", choices=("classic", "consumer", "share", "streams")),
        ConfigDef("group.consumer.heartbeat.interval.ms", _T.INT, 5000,
                  "Heartbeat interval for consumer-protocol groups.", minimum=1),
        ConfigDef("group.consumer.session.timeout.ms", _T.INT, 45000,
                  "Session timeout for consumer-protocol groups.", minimum=1),
        ConfigDef("group.consumer.assignors", _T.LIST, ["uniform", "range"],
                  "Server-side assignors, the first is the default."),
        ConfigDef("group.consumer.migration.policy", _T.STRING, "bidirectional",
                  "Online conversion of a non-empty group between the classic and the "
                  "consumer protocol: bidirectional, upgrade, downgrade or disabled.",
                  validator=_migration_policy),
        ConfigDef("group.share.record.lock.duration.ms", _T.INT, 30_000,
                  "How long a share group member holds the records it acquired.",
                  minimum=1000, maximum=3_600_000),
        ConfigDef("group.share.delivery.count.limit", _T.INT, 5,
                  "Deliveries of a record to share group members before it is archived.",
                  minimum=2, maximum=10),
        ConfigDef("group.share.partition.max.record.locks", _T.INT, 2000,
                  "Records of a share-partition in flight at once.", minimum=100,
                  maximum=10_000),
        ConfigDef("group.share.session.timeout.ms", _T.INT, 45_000,
                  "Session timeout of share group members.", minimum=1),
        ConfigDef("group.share.heartbeat.interval.ms", _T.INT, 5000,
                  "Heartbeat interval of share group members.", minimum=1),
        ConfigDef("group.share.max.size", _T.INT, 200, "Most members in a share group.",
                  minimum=1, maximum=1000),
        ConfigDef("group.share.max.share.sessions", _T.INT, 2000,
                  "Share sessions a broker keeps open at once.", minimum=1),
        ConfigDef("transaction.state.log.num.partitions", _T.INT, 50,
                  "Partitions of __transaction_state.", minimum=1, read_only=True),
        ConfigDef("transaction.state.log.replication.factor", _T.INT, 1,
                  "Replication factor of __transaction_state.", minimum=1, kafka_default=3,
                  why_different="A single embedded broker cannot hold 3 copies."),
        ConfigDef("transaction.state.log.min.isr", _T.INT, 1,
                  "min.insync.replicas of __transaction_state.", minimum=1, kafka_default=2),
        ConfigDef("transaction.max.timeout.ms", _T.INT, 900_000,
                  "Largest transaction.timeout.ms a producer may ask for.", minimum=1),
        ConfigDef("transactional.id.expiration.ms", _T.INT, 604_800_000,
                  "Idle time after which a transactional id is forgotten.", minimum=1),
        ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", _T.INT,
                  10_000, "How often expired transactions are aborted.", minimum=1),
        ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", _T.INT,
                  3_600_000, "How often expired transactional ids are removed.", minimum=1),
        ConfigDef("transaction.state.log.segment.bytes", _T.INT, 104_857_600,
                  "Segment size of __transaction_state.", minimum=1),
        ConfigDef("zookeeper.connect", _T.STRING, None,
                  "ZooKeeper ensemble for a cluster; unset runs the embedded single-broker store.",
                  read_only=True),
        ConfigDef("zookeeper.session.timeout.ms", _T.INT, 18000,
                  "ZooKeeper session timeout: how long a killed broker keeps its partitions "
                  "before the controller moves them.", minimum=1, read_only=True),
        ConfigDef("zookeeper.connection.timeout.ms", _T.INT, None,
                  "Longest wait to connect to ZooKeeper at start-up; unset means "
                  "zookeeper.session.timeout.ms.", minimum=1, read_only=True),
        ConfigDef("auto.leader.rebalance.enable", _T.BOOLEAN, True,
                  "The controller moves leadership back to preferred replicas."),
        ConfigDef("leader.imbalance.check.interval.seconds", _T.LONG, 300,
                  "How often the controller checks the leader balance.", minimum=1),
        ConfigDef("leader.imbalance.per.broker.percentage", _T.INT, 10,
                  "Share of a broker's preferred partitions it may not lead before "
                  "they are moved back.", minimum=0),
        ConfigDef("metrics.port", _T.INT, -1,
                  "Port of the Prometheus /metrics endpoint; -1 disables it.", minimum=-1),
        ConfigDef("schema.registry.listeners", _T.STRING, None,
                  "http://host:port of a Confluent-compatible schema registry hosted in this "
                  "broker's process (Redpanda's schema_registry); unset hosts none.",
                  read_only=True, validator=registry_listener_problem),
        *_broker_topic_defaults(),
    ]
)


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
# Kafka's replication throttles (reassignments): not honoured yet, so refused
_REPLICATION_THROTTLES = frozenset({
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
    "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
    "replica.alter.log.dirs.io.max.bytes.per.second",
})
# wired into the listeners and the request pipeline so far
# per listener too (listener.name.<l>.max.connections): connection_limits.py
_CONNECTION_LIMITS = frozenset({"max.connections", "max.connection.creation.rate"})
_WIRED = TLS_PROPERTIES | SASL_PROPERTIES | AUTHORIZER_PROPERTIES | _CONNECTION_LIMITS
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
                    raise ConfigError(f"{name} is not supported yet: replication is not "
                                      "throttled, and a reassignment would run unbounded")
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
        if authorizer and self._values.get("zookeeper.connect"):
            raise ConfigError("authorizer.class.name: ACLs on ZooKeeper (/kafka-acl) are "
                              "not supported yet")
        if authorizer:
            AclAuthorizer.from_config(self.security_props)  # super.users must parse
        # overrides must resolve, per-listener limits parse, per-ip 0 needs overrides
        ConnectionLimits.from_config(self.__getitem__, self.security_props,
                                     [li.name for li in self.listeners])
        secured = [li.name for li in self.listeners if protocols[li.name] != "PLAINTEXT"]
        if self._values.get("zookeeper.connect") and secured:
            if not any(li.name == "PLAINTEXT" for li in self.listeners):
                raise ConfigError(
                    f"listeners: a broker on ZooKeeper with {', '.join(secured)} needs a "
                    "PLAINTEXT listener too: brokers replicate over it (inter-broker "
                    "security is not supported yet)")
            for name in self.security_props:
                if name.endswith("sasl.enabled.mechanisms") and "SCRAM" in \
                        self.security_props[name].upper():
                    raise ConfigError(f"{name}: SCRAM on ZooKeeper is not supported yet "
                                      "(credentials live in the embedded store only)")
        if self._values.get("schema.registry.listeners") and not any(
                protocols[li.name] == "PLAINTEXT" for li in self.listeners):
            raise ConfigError("schema.registry.listeners: the hosted registry reaches its "
                              "broker through a PLAINTEXT listener, and this broker has none")
        if not self.log_dirs:
            raise ConfigError("log.dirs is empty")
        ReplicaSettings.from_config(self.__getitem__)  # the replica.* combinations

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
