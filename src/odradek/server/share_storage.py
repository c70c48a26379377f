"""The broker's side of the share coordinator: `__share_group_state` and the persister.

The share coordinator (coordinator/share/state.py) knows no broker; this adapter gives
it the state partitions through the replica manager (the runtime's `ReplicaLog`),
creates the topic when a share-partition first needs it (as Kafka's persister does
through FindCoordinator), and is the share-partition leaders' `Persister`: a state
partition this broker leads is read and written in-process, one another broker leads
through ReadShareGroupState / WriteShareGroupState to that broker, as Kafka's
DefaultStatePersister does.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any

from odradek.coordinator.runtime import ReplicaLog
from odradek.coordinator.share.state import SHARE_STATE_TOPIC, ShareStateCoordinator
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages import request_class
from odradek.protocol.share_state_records import StateBatch
from odradek.server.broker_channels import BrokerChannels
from odradek.server.group_storage import ensure_internal_topic, led_partitions

if TYPE_CHECKING:
    from odradek.server.core import BrokerCore

log = logging.getLogger(__name__)

INITIALIZE, READ, WRITE, DELETE, SUMMARY = 83, 84, 85, 86, 87
RETRIABLE = (ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress,
             ErrorCode.coordinator_not_available, ErrorCode.request_timed_out)
RETRY_FOR_S = 10.0  # how long a read or write waits for the state partition to be served
TIMEOUT_S = 30.0
Batches = list[tuple[int, int, int, int]]


def create_share_state_coordinator(broker: BrokerCore) -> ShareStateCoordinator:
    config = broker.config

    def partition_count(topic_id: uuid.UUID) -> int | None:
        info = broker.controller.image.topic_by_id(topic_id)
        return None if info is None else len(info.partitions)

    return ShareStateCoordinator(
        ReplicaLog(broker.replicas, SHARE_STATE_TOPIC,
                   lambda: int(broker.config["share.coordinator.write.timeout.ms"])),
        int(config["share.coordinator.state.topic.num.partitions"]),
        int(config["share.coordinator.snapshot.update.records.per.snapshot"]),
        partition_count,
        lambda p, offset: broker.logs.delete_records(SHARE_STATE_TOPIC, p, offset),
        int(config["share.coordinator.state.topic.prune.interval.ms"]))


async def ensure_share_state_topic(broker: BrokerCore) -> bool:
    config = broker.config
    # Kafka (KIP-932) keeps the state with cleanup.policy=delete and no retention, and
    # prunes what a later snapshot made useless: compaction would keep only the last
    # ShareUpdate of a share-partition and lose the ones before it
    return await ensure_internal_topic(
        broker, SHARE_STATE_TOPIC,
        int(config["share.coordinator.state.topic.num.partitions"]),
        int(config["share.coordinator.state.topic.replication.factor"]),
        {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1",
         "min.insync.replicas": str(config["share.coordinator.state.topic.min.isr"]),
         "segment.bytes": str(config["share.coordinator.state.topic.segment.bytes"]),
         "unclean.leader.election.enable": "false"})


def follow_share_state_leadership(broker: BrokerCore, state: ShareStateCoordinator) -> None:
    state.follow(led_partitions(broker, SHARE_STATE_TOPIC))


class BrokerPersister:
    """The share-partition leaders' way to the share coordinator."""

    def __init__(self, broker: BrokerCore, state: ShareStateCoordinator) -> None:
        self.broker = broker
        self.state = state
        self.channels = BrokerChannels(broker, "share-persister", TIMEOUT_S)

    def close(self) -> None:
        self.channels.close()

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   leader_epoch: int) -> tuple[int, int, Batches]:
        async def local() -> tuple[int, int, Batches]:
            r = self.state.read((group_id, topic_id, partition), leader_epoch)
            return r.state_epoch, r.start_offset, [
                (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                for b in r.batches]

        async def remote(leader: int) -> tuple[int, int, Batches]:
            m = sys.modules[request_class(READ, 0).__module__]
            body = m.ReadShareGroupStateRequest(group_id=group_id, topics=(m.ReadStateData(
                topic_id=topic_id, partitions=(m.PartitionData(
                    partition=partition, leader_epoch=leader_epoch),)),))
            p = (await self._call(leader, READ, 0, body)).results[0].partitions[0]
            if p.error_code:
                raise KafkaError(p.error_message or "", ErrorCode(p.error_code))
            batches: Batches = [
                (int(b.first_offset), int(b.last_offset), int(b.delivery_state),
                 int(b.delivery_count)) for b in p.state_batches]
            return int(p.state_epoch), int(p.start_offset), batches

        result: tuple[int, int, Batches] = await self._retrying(
            group_id, topic_id, partition, local, remote)
        return result

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int,
                    state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: Batches) -> None:
        async def local() -> None:
            await self.state.write((group_id, topic_id, partition), state_epoch,
                                   leader_epoch, start_offset,
                                   [StateBatch(*b) for b in batches])

        async def remote(leader: int) -> None:
            m = sys.modules[request_class(WRITE, 0).__module__]
            body = m.WriteShareGroupStateRequest(group_id=group_id, topics=(m.WriteStateData(
                topic_id=topic_id, partitions=(m.PartitionData(
                    partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch,
                    start_offset=start_offset, state_batches=tuple(
                        m.StateBatch(first_offset=a, last_offset=b, delivery_state=c,
                                     delivery_count=d) for a, b, c, d in batches)),)),))
            p = (await self._call(leader, WRITE, 0, body)).results[0].partitions[0]
            if p.error_code:
                raise KafkaError(p.error_message or "", ErrorCode(p.error_code))

        await self._retrying(group_id, topic_id, partition, local, remote)

    async def summary(self, group_id: str, topic_id: uuid.UUID, partition: int
                      ) -> tuple[int, int, int]:
        async def local() -> tuple[int, int, int]:
            r = self.state.summary((group_id, topic_id, partition))
            return r.state_epoch, r.leader_epoch, r.start_offset

        async def remote(leader: int) -> tuple[int, int, int]:
            m = sys.modules[request_class(SUMMARY, 1).__module__]
            body = m.ReadShareGroupStateSummaryRequest(group_id=group_id, topics=(
                m.ReadStateSummaryData(topic_id=topic_id, partitions=(m.PartitionData(
                    partition=partition, leader_epoch=-1),)),))
            p = (await self._call(leader, SUMMARY, 1, body)).results[0].partitions[0]
            if p.error_code:
                raise KafkaError(p.error_message or "", ErrorCode(p.error_code))
            return int(p.state_epoch), int(p.leader_epoch), int(p.start_offset)

        result: tuple[int, int, int] = await self._retrying(
            group_id, topic_id, partition, local, remote)
        return result

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         state_epoch: int, start_offset: int) -> None:
        async def local() -> None:
            await self.state.initialize((group_id, topic_id, partition), state_epoch,
                                        start_offset)

        async def remote(leader: int) -> None:
            m = sys.modules[request_class(INITIALIZE, 0).__module__]
            body = m.InitializeShareGroupStateRequest(group_id=group_id, topics=(
                m.InitializeStateData(topic_id=topic_id, partitions=(m.PartitionData(
                    partition=partition, state_epoch=state_epoch,
                    start_offset=start_offset),)),))
            p = (await self._call(leader, INITIALIZE, 0, body)).results[0].partitions[0]
            if p.error_code:
                raise KafkaError(p.error_message or "", ErrorCode(p.error_code))

        await self._retrying(group_id, topic_id, partition, local, remote)

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        async def local() -> None:
            await self.state.delete((group_id, topic_id, partition))

        async def remote(leader: int) -> None:
            m = sys.modules[request_class(DELETE, 0).__module__]
            body = m.DeleteShareGroupStateRequest(group_id=group_id, topics=(
                m.DeleteStateData(topic_id=topic_id, partitions=(m.PartitionData(
                    partition=partition),)),))
            p = (await self._call(leader, DELETE, 0, body)).results[0].partitions[0]
            if p.error_code:
                raise KafkaError(p.error_message or "", ErrorCode(p.error_code))

        await self._retrying(group_id, topic_id, partition, local, remote)

    async def _retrying(self, group_id: str, topic_id: uuid.UUID, partition: int,
                        local: Any, remote: Any) -> Any:
        """Run against the state partition's leader; while it is being created, elected
        or loaded (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, …), try again for a
        while, as Kafka's persister does."""
        deadline = time.monotonic() + RETRY_FOR_S
        delay = 0.01
        while True:
            try:
                if not await ensure_share_state_topic(self.broker):
                    raise KafkaError(f"{SHARE_STATE_TOPIC} could not be created",
                                     ErrorCode.coordinator_not_available)
                leader = self._leader(self.state.partition_for(group_id, topic_id, partition))
                if leader == self.broker.node_id:
                    return await local()
                if leader < 0:
                    raise KafkaError(f"{SHARE_STATE_TOPIC} partition has no leader",
                                     ErrorCode.coordinator_not_available)
                return await remote(leader)
            except KafkaError as e:
                if e.code not in RETRIABLE or time.monotonic() + delay > deadline:
                    raise
            await asyncio.sleep(delay)  # a backoff, not a synchronisation
            delay = min(delay * 2, 0.5)

    def _leader(self, partition: int) -> int:
        info = self.broker.controller.image.topics.get(SHARE_STATE_TOPIC)
        if info is None or partition >= len(info.partitions):
            return -1
        return info.partitions[partition].leader

    async def _call(self, broker_id: int, api_key: int, version: int, body: Any) -> Any:
        entry = self.channels.get(broker_id)
        if entry is None:
            raise KafkaError(f"broker {broker_id} is not available",
                             ErrorCode.coordinator_not_available)
        channel, lock = entry
        try:
            async with lock:
                return await channel.call(api_key, version, body)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as e:
            raise KafkaError(f"share coordinator on broker {broker_id}: {e}",
                             ErrorCode.request_timed_out) from e
