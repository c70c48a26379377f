"""The broker's side of the group coordinator: `__consumer_offsets` and the topics.

The coordinator (coordinator/group) knows no broker; this adapter gives it the
offsets partitions through the replica manager (the runtime's `ReplicaLog`) and the
topics from the metadata image, and tells it which offsets partitions this broker
leads. It also creates `__consumer_offsets` on the first FindCoordinator, as Kafka does.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

from odradek.coordinator.group import GroupConfig, GroupCoordinator
from odradek.coordinator.group.consumer import TopicsView
from odradek.coordinator.group.coordinator import OFFSETS_TOPIC
from odradek.coordinator.runtime import ReplicaLog
from odradek.protocol.errors import ErrorCode, KafkaError, TopicAlreadyExists

if TYPE_CHECKING:
    from odradek.server.core import BrokerCore

log = logging.getLogger(__name__)

__all__ = ["OFFSETS_TOPIC", "create_group_coordinator", "ensure_internal_topic",
           "ensure_offsets_topic", "follow_leadership", "led_partitions"]


class BrokerOffsetsLog(ReplicaLog):
    """`__consumer_offsets` through the replica manager, and the topics of the image."""

    def __init__(self, broker: BrokerCore) -> None:
        super().__init__(broker.replicas, OFFSETS_TOPIC, lambda: commit_timeout_ms(broker))
        self.broker = broker
        self.topics = TopicsView(self._by_name, self._name_of, self._all_names)

    def _by_name(self, name: str) -> tuple[uuid.UUID, int] | None:
        info = self.broker.controller.image.topics.get(name)
        return None if info is None else (info.topic_id, len(info.partitions))

    def _name_of(self, topic_id: uuid.UUID) -> str | None:
        info = self.broker.controller.image.topic_by_id(topic_id)
        return None if info is None else info.name

    def _all_names(self) -> Iterable[str]:
        return list(self.broker.controller.image.topics)


def commit_timeout_ms(broker: BrokerCore) -> int:
    """How long a coordinator's write waits for the ISR (Kafka's name says offsets; its
    transaction coordinator waits as long)."""
    return int(broker.config["offsets.commit.timeout.ms"])


def create_group_coordinator(broker: BrokerCore) -> GroupCoordinator:
    return GroupCoordinator(GroupConfig.from_broker(broker.config.values()),
                            BrokerOffsetsLog(broker))


async def ensure_offsets_topic(broker: BrokerCore) -> bool:
    """Create `__consumer_offsets` if it is missing; False when that failed."""
    config = broker.config
    return await ensure_internal_topic(
        broker, OFFSETS_TOPIC, int(config["offsets.topic.num.partitions"]),
        int(config["offsets.topic.replication.factor"]),
        {"cleanup.policy": "compact",
         "segment.bytes": str(config["offsets.topic.segment.bytes"]),
         "compression.type": "producer"})


async def ensure_internal_topic(broker: BrokerCore, name: str, partitions: int, replication: int,
                                configs: dict[str, str]) -> bool:
    """Create an internal topic if it is missing; False when that failed (or must wait:
    in a cluster, until enough brokers are alive for its replication factor)."""
    if name in broker.controller.image.topics:
        return True
    try:
        await broker.controller.create_internal_topic(name, partitions, replication, configs)
    except TopicAlreadyExists:
        return True
    except KafkaError as e:
        if e.code == ErrorCode.coordinator_not_available:  # waiting for brokers: expected
            log.info("not creating %s yet: %s", name, e)
        else:
            log.exception("could not create %s", name)
        return False
    return True


def led_partitions(broker: BrokerCore, topic: str) -> set[int]:
    """The partitions of an internal topic this broker leads (and holds a replica of)."""
    info = broker.controller.image.topics.get(topic)
    if info is None:
        return set()
    return {p.partition for p in info.partitions
            if p.leader == broker.node_id and (topic, p.partition) in broker.replicas.partitions}


def follow_leadership(broker: BrokerCore) -> None:
    """Tell the coordinator which offsets partitions this broker leads now."""
    broker.groups.follow(led_partitions(broker, OFFSETS_TOPIC))
