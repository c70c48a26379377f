"""The znodes of a Kafka cluster in ZooKeeper: paths and JSON, as Kafka's ZkData lays them out.

Kafka-era tools (kafka-topics --zookeeper, kafka-reassign-partitions, zkCli, Burrow,
Cruise Control) read and write these same znodes, so the layout and the JSON field
names are Kafka's, not ours. Pure functions: bytes in, values out.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.cluster.metadata import BrokerInfo

# ---- paths -----------------------------------------------------------------------------

BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
SEQID = "/brokers/seqid"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_USERS = "/config/users"  # quotas (and SCRAM credentials) per user[/clients/<c>]
CONFIG_CLIENTS = "/config/clients"  # quotas per client id
CONFIG_CLIENT_METRICS = "/config/client-metrics"  # KIP-714 subscriptions, by name
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE = 1  # Kafka's LogDirEventNotificationHandler.LogDirFailureEvent
CLUSTER_ID = "/cluster/id"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
FEATURE = "/feature"  # the finalized feature levels (KIP-584), Kafka's FeatureZNode
DEFAULT_ENTITY = "<default>"

# What a Kafka broker creates at start-up (KafkaZkClient.createTopLevelPaths).
# ACLs (AclAuthorizer): literal resources, prefixed ones, and their change notifications
LITERAL_ROOT = "/kafka-acl"
EXTENDED_ROOT = "/kafka-acl-extended"
PREFIXED_ROOT = f"{EXTENDED_ROOT}/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
ACL_PATHS = (LITERAL_ROOT, PREFIXED_ROOT, LITERAL_CHANGES, EXTENDED_CHANGES)

PERSISTENT_PATHS = (
    "/consumers",
    BROKER_IDS,
    TOPICS,
    CONFIG_CHANGES,
    "/config/clients",
    CONFIG_TOPICS,
    CONFIG_BROKERS,
    "/config/users",
    "/config/ips",
    DELETE_TOPICS,
    ISR_CHANGE_NOTIFICATION,
    LOG_DIR_EVENT_NOTIFICATION,
    SEQID,
    "/cluster",
    PRODUCER_ID_BLOCK,
    *ACL_PATHS,  # KafkaZkClient.createAclPaths
)

NO_LEADER = -1
PRODUCER_ID_BLOCK_SIZE = 1000


def broker_path(node_id: int) -> str:
    return f"{BROKER_IDS}/{node_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def broker_config_path(entity: str = DEFAULT_ENTITY) -> str:
    return f"{CONFIG_BROKERS}/{entity}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def _dump(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _load(data: bytes | None) -> Any:
    if not data:
        return None
    return json.loads(data.decode("utf-8"))


def _now_ms_text() -> str:
    return str(int(time.time() * 1000))


# ---- /feature -------------------------------------------------------------------------------

FEATURE_ZNODE_VERSION = 2  # Kafka's FeatureZNode V2: max_version_level only (KIP-778)
FEATURE_ENABLED = 1  # FeatureZNodeStatus.Enabled


def encode_features(levels: Mapping[str, int]) -> bytes:
    """Kafka's FeatureZNode V2; a level-0 feature is left out (Kafka refuses
    max_version_level < 1 when it reads the znode)."""
    return _dump({
        "version": FEATURE_ZNODE_VERSION,
        "status": FEATURE_ENABLED,
        "features": {name: {"max_version_level": level}
                     for name, level in sorted(levels.items()) if level > 0},
    })


def decode_features(data: bytes | None) -> dict[str, int]:
    """The finalized levels of a FeatureZNode (V1's min_version_level is ignored, as
    Kafka does since KIP-778); a disabled or unreadable znode finalizes nothing."""
    try:
        body = _load(data) or {}
        if body.get("status") != FEATURE_ENABLED:
            return {}
        return {str(name): int(v["max_version_level"])
                for name, v in (body.get("features") or {}).items()
                if int(v["max_version_level"]) > 0}
    except (ValueError, TypeError, KeyError, AttributeError):
        return {}


# ---- /brokers/ids/<id> -------------------------------------------------------------------

def encode_broker(info: BrokerInfo, security_protocols: Mapping[str, str] | None = None) -> bytes:
    """Version 5 registration: endpoints, the listener → protocol map, rack, and the
    top-level host/port of the first PLAINTEXT endpoint for old clients."""
    protocols = dict(security_protocols or {})
    endpoints = list(info.listeners) or [("PLAINTEXT", info.host, info.port)]
    for name, _, _ in endpoints:
        protocols.setdefault(name, name if name in _SECURITY_PROTOCOLS else "PLAINTEXT")
    plaintext = next(((h, p) for n, h, p in endpoints if protocols[n] == "PLAINTEXT"),
                     ("", -1))
    body: dict[str, Any] = {
        "version": 5,
        "host": plaintext[0] or None,
        "port": plaintext[1],
        "endpoints": [f"{n}://{h}:{p}" for n, h, p in endpoints],
        "listener_security_protocol_map": {n: protocols[n] for n, _, _ in endpoints},
        "jmx_port": -1,
        "features": {},
        "timestamp": _now_ms_text(),
    }
    if info.rack:
        body["rack"] = info.rack
    return _dump(body)


_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def decode_broker(node_id: int, data: bytes) -> BrokerInfo:
    body = _load(data) or {}
    listeners: list[tuple[str, str, int]] = []
    for endpoint in body.get("endpoints") or []:
        name, _, rest = str(endpoint).partition("://")
        host, _, port = rest.rpartition(":")
        listeners.append((name, host.strip("[]"), int(port)))
    if not listeners and body.get("host"):
        listeners.append(("PLAINTEXT", body["host"], int(body["port"])))
    first = listeners[0] if listeners else ("PLAINTEXT", "", -1)
    return BrokerInfo(node_id, first[1], first[2], body.get("rack"), tuple(listeners))


# ---- /brokers/topics/<t> -------------------------------------------------------------------

@dataclass(frozen=True)
class TopicAssignment:
    """A topic's replica assignment; adding/removing replicas of an ongoing reassignment."""

    topic_id: str | None  # Kafka's Uuid text (URL-safe base64)
    partitions: dict[int, tuple[int, ...]]
    adding: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing: dict[int, tuple[int, ...]] = field(default_factory=dict)


def encode_topic(assignment: TopicAssignment) -> bytes:
    def as_json(m: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
        return {str(p): list(r) for p, r in sorted(m.items())}

    body: dict[str, Any] = {
        "version": 3,
        "partitions": as_json(assignment.partitions),
        "adding_replicas": as_json(assignment.adding),
        "removing_replicas": as_json(assignment.removing),
    }
    if assignment.topic_id is not None:
        body["topic_id"] = assignment.topic_id
    return _dump(body)


def decode_topic(data: bytes) -> TopicAssignment:
    body = _load(data) or {}

    def as_map(key: str) -> dict[int, tuple[int, ...]]:
        return {int(p): tuple(int(b) for b in r) for p, r in (body.get(key) or {}).items()}

    return TopicAssignment(body.get("topic_id"), as_map("partitions"), as_map("adding_replicas"),
                           as_map("removing_replicas"))


# ---- /brokers/topics/<t>/partitions/<p>/state --------------------------------------------

@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's state znode, with the znode's version (Kafka's zkVersion): every
    writer (the controller, the leader changing its ISR) sets it conditionally on it."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1

    def new_leader(self, leader: int, isr: Iterable[int], controller_epoch: int
                   ) -> LeaderAndIsr:
        """The next state: a new leader epoch, as every controller change makes one."""
        return LeaderAndIsr(leader, self.leader_epoch + 1, tuple(isr), controller_epoch,
                            self.zk_version)


def encode_state(state: LeaderAndIsr) -> bytes:
    return _dump({"controller_epoch": state.controller_epoch, "leader": state.leader,
                  "version": 1, "leader_epoch": state.leader_epoch, "isr": list(state.isr)})


def state_write(tp: tuple[str, int], state: LeaderAndIsr) -> tuple[Any, ...]:
    """The transaction op (zk_client.py) that writes `state` over the version it holds."""
    return ("set", partition_state_path(*tp), encode_state(state), state.zk_version)


def decode_state(data: bytes, zk_version: int) -> LeaderAndIsr:
    body = _load(data) or {}
    return LeaderAndIsr(int(body["leader"]), int(body["leader_epoch"]),
                        tuple(int(b) for b in body["isr"]), int(body["controller_epoch"]),
                        zk_version)


# ---- /controller, /controller_epoch, /cluster/id ---------------------------------------------

def encode_controller(node_id: int) -> bytes:
    return _dump({"version": 1, "brokerid": node_id, "timestamp": _now_ms_text()})


def decode_controller(data: bytes | None) -> int:
    body = _load(data)
    return int(body["brokerid"]) if body else -1


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode())


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str((_load(data) or {})["id"])


# ---- /config/<type>/<name> and change notifications ------------------------------------------

def encode_config(config: Mapping[str, str]) -> bytes:
    return _dump({"version": 1, "config": dict(config)})


def decode_config(data: bytes | None) -> dict[str, str]:
    body = _load(data) or {}
    return {str(k): str(v) for k, v in (body.get("config") or {}).items()}


def encode_config_change(entity_path: str) -> bytes:
    """`entity_path` is "topics/<name>" or "brokers/<default>"."""
    return _dump({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    return str((_load(data) or {}).get("entity_path", ""))


# ---- /admin/reassign_partitions, /admin/preferred_replica_election, /isr_change_notification --

TopicPartition = tuple[str, int]


def encode_reassignment(moves: Mapping[TopicPartition, Sequence[int]]) -> bytes:
    return _dump({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(moves.items())]})


def decode_reassignment(data: bytes) -> dict[TopicPartition, tuple[int, ...]]:
    body = _load(data) or {}
    return {(str(e["topic"]), int(e["partition"])): tuple(int(b) for b in e["replicas"])
            for e in body.get("partitions") or []}


def encode_partitions(partitions: Iterable[TopicPartition]) -> bytes:
    """The body of /admin/preferred_replica_election and of an ISR change notification."""
    return _dump({"version": 1, "partitions": [
        {"topic": t, "partition": p} for t, p in sorted(set(partitions))]})


def decode_partitions(data: bytes) -> set[TopicPartition]:
    body = _load(data) or {}
    return {(str(e["topic"]), int(e["partition"])) for e in body.get("partitions") or []}


def encode_log_dir_event(broker: int, partitions: Iterable[TopicPartition]) -> bytes:
    """A /log_dir_event_notification znode as Kafka writes it ({"version":1,"broker":N,
    "event":1}), with the partitions on the failed dir: Kafka's controller learns them
    from the broker's LeaderAndIsr answers, ours reads them here (Kafka ignores the
    extra field)."""
    return _dump({"version": 1, "broker": broker, "event": LOG_DIR_FAILURE, "partitions": [
        {"topic": t, "partition": p} for t, p in sorted(set(partitions))]})


def decode_log_dir_event(data: bytes) -> tuple[int, set[TopicPartition]]:
    body = _load(data) or {}
    return int(body["broker"]), decode_partitions(data)


# ---- /latest_producer_id_block -------------------------------------------------------------

def encode_producer_id_block(broker: int, start: int, end: int) -> bytes:
    """Kafka writes the bounds as strings (they are longs; JSON readers lose precision)."""
    return _dump({"version": 1, "broker": broker, "block_start": str(start),
                  "block_end": str(end)})


def decode_producer_id_block(data: bytes | None) -> tuple[int, int] | None:
    """(first, last) producer id of the latest block handed out, if any."""
    body = _load(data)
    if not body:
        return None
    return int(body["block_start"]), int(body["block_end"])
