"""The metadata image: what every broker knows about the cluster.

Values only; the controller (controller.py) makes new images, the stores persist them.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from odradek.protocol.errors import InvalidTopic
from odradek.storage.checkpoints import new_uuid, uuid_from_str, uuid_to_str

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str) -> None:
    """Kafka's rules: 1-249 chars of [a-zA-Z0-9._-], and not '.' or '..'."""
    if not name:
        raise InvalidTopic("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopic("Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopic(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters"
        )
    if not _LEGAL.match(name):
        raise InvalidTopic(
            f"Topic name \"{name}\" is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )


def uuid_to_kafka(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    return uuid_to_str(u.bytes)


def kafka_to_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=uuid_from_str(text))


ZERO_UUID = uuid.UUID(int=0)
# The finalized feature levels of a new cluster, Kafka 4's (server/features.py says what
# each one means and which levels a broker supports)
NEW_CLUSTER_FEATURES: dict[str, int] = {
    "group.version": 1, "metadata.version": 25, "transaction.version": 2}


def new_topic_id() -> uuid.UUID:
    return kafka_to_uuid(new_uuid())


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    listeners: tuple[tuple[str, str, int], ...] = ()  # (listener name, host, port)
    fenced: bool = False

    def endpoint(self, listener: str) -> tuple[str, int]:
        for name, host, port in self.listeners:
            if name == listener:
                return host, port
        return self.host, self.port


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    partition_epoch: int = 0  # with ZooKeeper: the state znode's version (Kafka's zkVersion)
    offline_replicas: tuple[int, ...] = ()
    # an ongoing reassignment: replicas being added / removed (they are in `replicas`)
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    controller_epoch: int = 0  # of the controller that last wrote the state


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionInfo, ...]
    configs: dict[str, str] = field(default_factory=dict)  # overrides, as strings

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0

    def with_configs(self, configs: dict[str, str]) -> TopicInfo:
        return replace(self, configs=dict(configs))


def topic_to_json(t: TopicInfo) -> dict[str, Any]:
    return {
        "name": t.name,
        "topic_id": uuid_to_kafka(t.topic_id),
        "configs": t.configs,
        "partitions": [
            {
                "partition": p.partition,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "partition_epoch": p.partition_epoch,
            }
            for p in t.partitions
        ],
    }


@dataclass(frozen=True)
class MetadataImage:
    cluster_id: str
    controller_id: int
    brokers: dict[int, BrokerInfo]
    topics: dict[str, TopicInfo]
    broker_configs: dict[str, str] = field(default_factory=dict)  # dynamic, cluster-wide
    next_producer_id: int = 0
    # Kafka's /config/users/<user>: SCRAM credentials in their stored form, per mechanism
    user_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    # Kafka's client-metrics config resources (KIP-714): subscription name -> configs
    client_metrics: dict[str, dict[str, str]] = field(default_factory=dict)
    # ACLs (resource type, name, pattern type, principal, host, operation, permission),
    # by Kafka's names: the embedded store's /kafka-acl
    acls: tuple[tuple[str, ...], ...] = ()
    # client quotas by entity, keyed by the entity's ZooKeeper path as Kafka lays it out
    # (`/config/users/alice/clients/<default>`): {path: {"producer_byte_rate": "1024"}}
    client_quotas: dict[str, dict[str, str]] = field(default_factory=dict)
    # finalized feature levels (KIP-584; level 0 is absent) and their epoch: the embedded
    # store's change counter, with ZooKeeper the /feature znode's version (as Kafka's)
    features: dict[str, int] = field(default_factory=dict)
    features_epoch: int = 0

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        """A dict lookup (Fetch v13+ names topics by id: a scan of every topic per
        lookup was quadratic in a fetch of many topics). The index is built on first
        use; a stale entry (the topics dict changed in place) rebuilds it."""
        index: dict[uuid.UUID, TopicInfo] | None = self.__dict__.get("_by_id")
        if index is not None:
            found = index.get(topic_id)
            if found is not None and self.topics.get(found.name) is found:
                return found
            if found is None and self.__dict__.get("_by_id_size") == len(self.topics):
                return None
        index = {t.topic_id: t for t in self.topics.values()}
        self.__dict__["_by_id"] = index
        self.__dict__["_by_id_size"] = len(self.topics)
        return index.get(topic_id)

    def to_json(self) -> dict[str, Any]:
        return {**self.header_json(), "features": self.features_json(),
                "topics": [topic_to_json(t) for t in self.topics.values()]}

    def features_json(self) -> dict[str, Any]:
        """The store's features record (kept apart from the header: a feature change
        need not rewrite the ACLs and quotas)."""
        return {"levels": dict(self.features), "epoch": self.features_epoch}

    def header_json(self) -> dict[str, Any]:
        """Everything but the topics: what the store records as one header record."""
        return {
            "version": 1,
            "cluster_id": self.cluster_id,
            "next_producer_id": self.next_producer_id,
            "broker_configs": self.broker_configs,
            "user_configs": self.user_configs,
            "client_metrics": self.client_metrics,
            "acls": [list(a) for a in self.acls],
            "client_quotas": self.client_quotas,
        }

    @staticmethod
    def topics_from_json(data: dict[str, Any]) -> dict[str, TopicInfo]:
        topics: dict[str, TopicInfo] = {}
        for t in data.get("topics", []):
            parts = tuple(
                PartitionInfo(
                    partition=p["partition"],
                    leader=p["leader"],
                    leader_epoch=p["leader_epoch"],
                    replicas=tuple(p["replicas"]),
                    isr=tuple(p["isr"]),
                    partition_epoch=p.get("partition_epoch", 0),
                )
                for p in t["partitions"]
            )
            topics[t["name"]] = TopicInfo(
                t["name"], kafka_to_uuid(t["topic_id"]), parts, dict(t.get("configs", {}))
            )
        return topics
