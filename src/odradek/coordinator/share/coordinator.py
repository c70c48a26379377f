"""The share group coordinator: share groups' members and assignments.

A share group lives where a consumer group would: it belongs to partition
`abs(javaHashCode(group.id)) % offsets.topic.num.partitions` of `__consumer_offsets`
and that partition's leader coordinates it, so FindCoordinator finds it as any group.
It is a state machine on the coordinator runtime, one shard per led partition, which
gives it NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS and its session timers. No
share group record is written yet (Kafka's ShareGroup* records are the next step):
the runtime reads nothing at load, and a share group is rebuilt by its members'
heartbeats after a restart or a coordinator move.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from odradek.coordinator.group.consumer import TopicsView
from odradek.coordinator.group.coordinator import OFFSETS_TOPIC, partition_for
from odradek.coordinator.runtime import CoordinatorRuntime, CoordinatorTimer, Record
from odradek.coordinator.share.config import ShareConfig
from odradek.coordinator.share.group import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    Assignment,
    HeartbeatResult,
    ShareGroup,
    ShareMember,
)
from odradek.protocol.batch import BatchHeader
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import Record as LogRecord

log = logging.getLogger(__name__)

MemberLeft = Callable[[str, str], None]  # (group id, member id)


class NothingStored:
    """The runtime's log for a coordinator that writes no records yet: the load replays
    nothing (rather than decoding the offsets partition a second time)."""

    async def append(self, partition: int, records: Sequence[Record], *,
                     producer_id: int = -1, producer_epoch: int = -1,
                     transactional: bool = False) -> None:
        raise KafkaError("share groups are not stored yet", ErrorCode.unknown_server_error)

    def read(self, partition: int, offset: int, max_bytes: int) -> tuple[bytes, int]:
        return b"", 0

    def log_start_offset(self, partition: int) -> int:
        return 0

    def leader_epoch(self, partition: int) -> int:
        return 0


class ShareShard:
    """One `__consumer_offsets` partition's share groups."""

    def __init__(self, partition: int, timer: CoordinatorTimer) -> None:
        self.partition = partition
        self.timer = timer
        self.groups: dict[str, ShareGroup] = {}

    def replay(self, batch: BatchHeader, record: LogRecord) -> None:
        pass

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        pass

    def on_loaded(self) -> None:
        pass

    def on_unloaded(self) -> None:
        self.groups.clear()


class ShareGroupCoordinator:
    def __init__(self, config: ShareConfig, topics: TopicsView,
                 on_member_left: MemberLeft | None = None) -> None:
        self.config = config
        self.topics = topics
        self.on_member_left = on_member_left
        self.runtime: CoordinatorRuntime[ShareShard] = CoordinatorRuntime(
            OFFSETS_TOPIC, NothingStored(), ShareShard)

    # ---- lifecycle (the broker's composition root drives these) -----------------------

    def start(self) -> None:
        self.runtime.start()

    def stop(self) -> None:
        self.runtime.stop()

    def follow(self, led: Iterable[int]) -> None:
        self.runtime.follow(led)

    # ---- reads -----------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_partitions)

    def _shard(self, group_id: str) -> ShareShard:
        return self.runtime.shard(self.partition_for(group_id), f"group {group_id}")

    def group(self, group_id: str) -> ShareGroup | None:
        """The share group, None when there is none (raises when not served here)."""
        return self._shard(group_id).groups.get(group_id)

    def remove_group(self, group_id: str) -> None:
        """Forget an empty group (DeleteGroups): its next member starts it anew."""
        self._shard(group_id).groups.pop(group_id, None)

    def list_groups(self) -> list[ShareGroup]:
        return [g for shard in self.runtime.active_shards() for g in shard.groups.values()]

    # ---- ShareGroupHeartbeat -----------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, epoch: int, *,
                  rack_id: str | None, subscribed_names: list[str] | None,
                  client_id: str, client_host: str) -> HeartbeatResult:
        if not group_id:
            raise KafkaError("the group id is empty", ErrorCode.invalid_group_id)
        if not member_id:
            raise KafkaError("the member id is empty", ErrorCode.invalid_request)
        if epoch < LEAVE_EPOCH:
            raise KafkaError(f"member epoch {epoch} is invalid", ErrorCode.invalid_request)
        shard = self._shard(group_id)
        interval = self.config.heartbeat_interval_ms
        group = shard.groups.get(group_id)
        if epoch == LEAVE_EPOCH:
            # its share sessions stay: the client closes them itself, with its final
            # acknowledgements, in requests that may arrive after this one
            if group is not None and group.remove(member_id) is not None:
                shard.timer.cancel(("share-session", group_id, member_id))
            return HeartbeatResult(ErrorCode.none, member_id, LEAVE_EPOCH, 0)
        if epoch == JOIN_EPOCH:
            if not subscribed_names:
                raise KafkaError("a joining member must subscribe to topics",
                                 ErrorCode.invalid_request)
            if group is None:
                group = shard.groups[group_id] = ShareGroup(group_id, shard.partition)
            member = group.members.get(member_id)
            if member is None:
                if len(group.members) >= self.config.max_size:
                    raise KafkaError(f"share group {group_id} has {self.config.max_size} "
                                     "members", ErrorCode.group_max_size_reached)
                member = group.members[member_id] = ShareMember(
                    member_id, client_id, client_host)
            member.epoch = JOIN_EPOCH
        else:
            if group is None:
                raise KafkaError(f"share group {group_id} not found",
                                 ErrorCode.group_id_not_found)
            member = group.member(member_id, epoch)
        if subscribed_names is not None:
            member.subscribed_names = sorted(set(subscribed_names))
            group.topics_seen.update(member.subscribed_names)
        if rack_id is not None:
            member.rack_id = rack_id
        changed = group.reconcile(member, self._target(member))
        self._arm_session(shard, group, member)
        return HeartbeatResult(
            ErrorCode.none, member_id, member.epoch, interval,
            member.assigned if changed or subscribed_names is not None else None)

    def _target(self, member: ShareMember) -> Assignment:
        """Every partition of every subscribed topic that exists."""
        out: Assignment = {}
        for name in member.subscribed_names:
            found = self.topics.by_name(name)
            if found is not None:
                topic_id, count = found
                out[topic_id] = frozenset(range(count))
        return out

    def _arm_session(self, shard: ShareShard, group: ShareGroup, member: ShareMember) -> None:
        def expire() -> None:
            if group.members.get(member.member_id) is member:
                log.info("share group %s: member %s's session timed out", group.group_id,
                         member.member_id)
                group.remove(member.member_id)
                if self.on_member_left is not None:
                    # a dead member: what it holds goes back now, not at lock expiry
                    self.on_member_left(group.group_id, member.member_id)

        shard.timer.schedule(("share-session", group.group_id, member.member_id),
                             self.config.session_timeout_ms, expire)
