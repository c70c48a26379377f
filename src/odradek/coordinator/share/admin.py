"""What the share group admin APIs do (DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets), on the broker coordinating the group, as Kafka's group
coordinator does them: each share-partition's start offset comes from the share
coordinator (ReadShareGroupStateSummary); altering writes a new state (a new state
epoch) at the given start offset, deleting removes the state; both only while the
group has no members (NON_EMPTY_GROUP otherwise). The leaders of the share-partitions
on this broker read the new state at their next fetch; elsewhere their next write is
fenced by the new state epoch and they read it then.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from odradek.coordinator.group.consumer import TopicsView
from odradek.coordinator.share.coordinator import ShareGroupCoordinator
from odradek.coordinator.share.manager import SharePartitionManager
from odradek.coordinator.share.partition import DONE
from odradek.protocol.errors import ErrorCode, KafkaError


@dataclass(frozen=True, slots=True)
class PartitionOffset:
    partition: int
    start_offset: int  # -1: the group has no state for it
    leader_epoch: int
    lag: int  # -1 when unknown
    error: KafkaError | None = None


class ShareGroupAdmin:
    def __init__(self, coordinator: ShareGroupCoordinator, partitions: SharePartitionManager,
                 topics: TopicsView) -> None:
        self.coordinator = coordinator
        self.partitions = partitions
        self.topics = topics

    def _check_coordinator(self, group_id: str) -> None:
        if not group_id:
            raise KafkaError("the group id is empty", ErrorCode.invalid_group_id)
        self.coordinator.group(group_id)  # NOT_COORDINATOR / LOAD_IN_PROGRESS

    def _check_empty(self, group_id: str) -> None:
        self._check_coordinator(group_id)
        group = self.coordinator.group(group_id)
        if group is not None and group.members:
            raise KafkaError(f"share group {group_id} has members: stop them first",
                             ErrorCode.non_empty_group)

    def topic(self, name: str) -> tuple[uuid.UUID, int]:
        found = self.topics.by_name(name)
        if found is None:
            raise KafkaError(f"unknown topic {name}", ErrorCode.unknown_topic_or_partition)
        return found

    def topics_of(self, group_id: str) -> list[str]:
        """The topics a group has state for: its members' subscriptions and the
        share-partitions this broker holds state or in-flight records of."""
        self._check_coordinator(group_id)
        names: set[str] = set()
        group = self.coordinator.group(group_id)
        if group is not None:
            names |= group.subscribed_names | group.topics_seen
        names |= {sp.topic for k, sp in self.partitions.partitions.items()
                  if k[0] == group_id}
        state = getattr(self.partitions.persister, "state", None)
        if state is not None:
            for _, topic_id, _ in state.keys_of(group_id):
                name = self.topics.name_of(topic_id)
                if name is not None:
                    names.add(name)
        return sorted(n for n in names if self.topics.by_name(n) is not None)

    # ---- DeleteGroups (42) of a share group ---------------------------------------------

    def is_share_group(self, group_id: str) -> bool:
        """A share group lives here: it has members, or state this broker knows of
        (members are rebuilt by heartbeats, the state outlives a restart)."""
        return self.coordinator.group(group_id) is not None or bool(self.topics_of(group_id))

    async def delete_group(self, group_id: str) -> None:
        """As Kafka's deleteGroups does a share group: NON_EMPTY_GROUP while it has
        members; otherwise every share-partition's state goes (DeleteShareGroupState),
        then the group."""
        self._check_empty(group_id)
        for name in self.topics_of(group_id):
            topic_id, count = self.topic(name)
            await self.delete(group_id, topic_id, count)
        self.partitions.forget_group(group_id)
        self.coordinator.remove_group(group_id)

    # ---- DescribeShareGroupOffsets (90) -----------------------------------------------

    async def describe(self, group_id: str, topic: str, partitions: list[int] | None
                       ) -> tuple[uuid.UUID | None, list[PartitionOffset]]:
        try:
            topic_id, count = self.topic(topic)
        except KafkaError as e:
            return None, [PartitionOffset(p, -1, -1, -1, e) for p in partitions or ()]
        out = []
        for p in range(count) if partitions is None else partitions:
            if not 0 <= p < count:
                out.append(PartitionOffset(p, -1, -1, -1, KafkaError(
                    f"{topic}-{p} does not exist", ErrorCode.unknown_topic_or_partition)))
                continue
            try:
                _, leader_epoch, start = await self.partitions.persister.summary(
                    group_id, topic_id, p)
            except KafkaError as e:
                out.append(PartitionOffset(p, -1, -1, -1, e))
                continue
            out.append(PartitionOffset(p, start, leader_epoch,
                                       self._lag(group_id, topic_id, p, start)))
        return topic_id, out

    def _lag(self, group_id: str, topic_id: uuid.UUID, index: int, start: int) -> int:
        """Records not yet delivered for good: what is in flight and not done, and what
        is past the share-partition end, up to the high watermark (-1 when this broker
        does not lead the partition)."""
        if start < 0:
            return -1
        try:
            leader = self.partitions.leader(topic_id, index)
        except KafkaError:
            return -1
        hwm = leader.high_watermark
        sp = self.partitions.partitions.get((group_id, topic_id, index))
        if sp is None or not sp.initialized or sp.start_offset != start:
            return max(hwm - start, 0)
        done = sum(1 for o, r in sp.records.items()
                   if sp.start_offset <= o < sp.end_offset and r.state in DONE)
        return max(hwm - start - done, 0)

    # ---- AlterShareGroupOffsets (91) --------------------------------------------------

    def check_alter(self, group_id: str) -> None:
        self._check_empty(group_id)

    async def alter(self, group_id: str, topic_id: uuid.UUID, index: int,
                    start_offset: int) -> None:
        state_epoch, _, _ = await self.partitions.persister.summary(group_id, topic_id,
                                                                    index)
        await self.partitions.persister.initialize(group_id, topic_id, index,
                                                   state_epoch + 1, start_offset)
        self.partitions.forget(group_id, topic_id, index)

    # ---- DeleteShareGroupOffsets (92) -------------------------------------------------

    async def delete(self, group_id: str, topic_id: uuid.UUID, count: int) -> None:
        for index in range(count):
            await self.partitions.persister.delete(group_id, topic_id, index)
            self.partitions.forget(group_id, topic_id, index)
