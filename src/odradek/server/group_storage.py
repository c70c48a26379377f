"""The broker's side of the group coordinator: `__consumer_offsets` and the topics.

The coordinator (coordinator/group) knows no broker; this adapter gives it the
offsets partitions through the replica manager — appends as the leader, in v2
batches whose offsets the log assigns — and the topics from the metadata image.
It also creates `__consumer_offsets` on the first FindCoordinator, as Kafka does.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from odradek.coordinator.group import GroupConfig, GroupCoordinator
from odradek.coordinator.group.consumer import TopicsView
from odradek.protocol.errors import ErrorCode, KafkaError, TopicAlreadyExists
from odradek.protocol.records import NewRecord, encode_batch
from odradek.storage.producer_state import AppendOrigin

if TYPE_CHECKING:
    from odradek.server.broker import Broker

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"


class BrokerOffsetsLog:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.topics = TopicsView(self._by_name, self._name_of, self._all_names)

    # ---- the coordinator's interface --------------------------------------------

    async def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]]
                     ) -> None:
        p = self.broker.replicas.get(OFFSETS_TOPIC, partition)
        batch = bytearray(encode_batch([NewRecord(key=k, value=v) for k, v in records]))
        await p.append_committed(batch, self._timeout_s())

    async def append_transactional(self, partition: int,
                                   records: Sequence[tuple[bytes, bytes | None]],
                                   producer_id: int, producer_epoch: int) -> None:
        p = self.broker.replicas.get(OFFSETS_TOPIC, partition)
        # Kafka writes TxnOffsetCommit as the producer's transactional batch, sequence 0,
        # appended as the coordinator (no sequence checks): the transaction's marker in
        # this partition then decides whether the offsets count.
        batch = bytearray(encode_batch([NewRecord(key=k, value=v) for k, v in records],
                                       producer_id=producer_id, producer_epoch=producer_epoch,
                                       base_sequence=0, transactional=True))
        await p.append_committed(batch, self._timeout_s(), origin=AppendOrigin.COORDINATOR)

    def _timeout_s(self) -> float:
        return int(self.broker.config["offsets.commit.timeout.ms"]) / 1000

    def read(self, partition: int, offset: int, max_bytes: int) -> tuple[bytes, int]:
        return self.broker.replicas.get(OFFSETS_TOPIC, partition).read_to_log_end(
            offset, max_bytes)

    def log_start_offset(self, partition: int) -> int:
        return self.broker.replicas.get(OFFSETS_TOPIC, partition).log.log_start_offset

    def _by_name(self, name: str) -> tuple[uuid.UUID, int] | None:
        info = self.broker.controller.image.topics.get(name)
        return None if info is None else (info.topic_id, len(info.partitions))

    def _name_of(self, topic_id: uuid.UUID) -> str | None:
        info = self.broker.controller.image.topic_by_id(topic_id)
        return None if info is None else info.name

    def _all_names(self) -> Iterable[str]:
        return list(self.broker.controller.image.topics)


def create_group_coordinator(broker: Broker) -> GroupCoordinator:
    return GroupCoordinator(GroupConfig.from_broker(broker.config.values()),
                            BrokerOffsetsLog(broker))


async def ensure_offsets_topic(broker: Broker) -> bool:
    """Create `__consumer_offsets` if it is missing; False when that failed."""
    config = broker.config
    return await ensure_internal_topic(
        broker, OFFSETS_TOPIC, int(config["offsets.topic.num.partitions"]),
        int(config["offsets.topic.replication.factor"]),
        {"cleanup.policy": "compact",
         "segment.bytes": str(config["offsets.topic.segment.bytes"]),
         "compression.type": "producer"})


async def ensure_internal_topic(broker: Broker, name: str, partitions: int, replication: int,
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


def follow_leadership(broker: Broker) -> None:
    """Tell the coordinator which offsets partitions this broker leads now."""
    info = broker.controller.image.topics.get(OFFSETS_TOPIC)
    led = set()
    if info is not None:
        led = {p.partition for p in info.partitions
               if p.leader == broker.node_id
               and (OFFSETS_TOPIC, p.partition) in broker.replicas.partitions}
    groups = broker.groups
    groups.on_resigned(groups.led - led)
    groups.on_elected(sorted(led - groups.led))
