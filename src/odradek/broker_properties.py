"""The broker's properties: name, type, default and doc of each (Kafka's KafkaConfig).

Beside `configdef` rather than in `server/`, because tools that never run a broker read
it too: `odradek advise` checks a server.properties against odradek's defaults, the test
kit writes one. The broker (server/config.py) parses and validates with it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from odradek.configdef import LONG_MAX, ConfigDef, ConfigTable, ConfigType
from odradek.home import Home
from odradek.storage.log_config import BROKER_SYNONYMS, TOPIC_CONFIGS

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
        ConfigDef("controller.quota.window.num", _T.INT, 11,
                  "Windows in a controller_mutation_rate burst (burst = rate x num x "
                  "size).", minimum=1, read_only=True),
        ConfigDef("controller.quota.window.size.seconds", _T.INT, 1,
                  "Seconds of one controller_mutation_rate window.", minimum=1,
                  read_only=True),
        ConfigDef("leader.replication.throttled.rate", _T.LONG, LONG_MAX,
                  "Bytes/s a leader returns to followers for throttled replicas "
                  "(leader.replication.throttled.replicas).", minimum=0),
        ConfigDef("follower.replication.throttled.rate", _T.LONG, LONG_MAX,
                  "Bytes/s a follower fetches for throttled replicas "
                  "(follower.replication.throttled.replicas).", minimum=0),
        ConfigDef("replication.quota.window.num", _T.INT, 11,
                  "Samples kept for replication quota rates.", minimum=1, read_only=True),
        ConfigDef("replication.quota.window.size.seconds", _T.INT, 1,
                  "Time span of one replication quota sample.", minimum=1, read_only=True),
        ConfigDef("queued.max.requests", _T.INT, 500,
                  "Requests queued per connection before reading pauses.", minimum=1),
        ConfigDef("queued.max.request.bytes", _T.LONG, 104_857_600,
                  "Request bytes all connections may hold at once (frames read, queued "
                  "or being handled, and responses beyond a connection's write buffer); "
                  "a connection that needs more stops reading until memory returns. "
                  "Kafka's default -1 (no bound) is allowed; any other value must be at "
                  "least socket.request.max.bytes. Default: 100 MiB, or "
                  "socket.request.max.bytes when that is larger.", read_only=True),
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
        ConfigDef("share.coordinator.state.topic.num.partitions", _T.INT, 50,
                  "Partitions of __share_group_state.", minimum=1, read_only=True),
        ConfigDef("share.coordinator.state.topic.replication.factor", _T.INT, 1,
                  "Replication factor of __share_group_state.", minimum=1, kafka_default=3,
                  why_different="A single embedded broker cannot hold 3 copies."),
        ConfigDef("share.coordinator.state.topic.min.isr", _T.INT, 1,
                  "min.insync.replicas of __share_group_state.", minimum=1, kafka_default=2),
        ConfigDef("share.coordinator.state.topic.segment.bytes", _T.INT, 104_857_600,
                  "Segment size of __share_group_state.", minimum=1),
        ConfigDef("share.coordinator.snapshot.update.records.per.snapshot", _T.INT, 500,
                  "ShareUpdate records of a share-partition before a new ShareSnapshot.",
                  minimum=0, maximum=500),
        ConfigDef("share.coordinator.state.topic.prune.interval.ms", _T.INT, 300_000,
                  "How often the share coordinator deletes the __share_group_state records "
                  "that later snapshots replaced.", minimum=1),
        ConfigDef("share.coordinator.write.timeout.ms", _T.INT, 5000,
                  "How long a share state write waits for every in-sync replica.",
                  minimum=1),
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
        ConfigDef("schema.registry.basic.auth.file", _T.STRING, None,
                  "The hosted registry's users: a password file (user: password per line), "
                  "as `odradek schema-registry --basic-auth-file`; unset: no basic auth.",
                  read_only=True),
        ConfigDef("schema.registry.enable.authorization", _T.BOOLEAN, False,
                  "ACLs on subjects and the registry for the hosted registry (Redpanda's "
                  "schema_registry_enable_authorization); needs the basic auth file.",
                  read_only=True),
        ConfigDef("schema.registry.super.users", _T.STRING, "",
                  "Principals (User:name;...) the hosted registry's ACLs never refuse.",
                  read_only=True),
        *_broker_topic_defaults(),
    ]
)
