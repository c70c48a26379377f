"""The group coordinator: which groups this broker coordinates, and their offsets.

A group belongs to one partition of `__consumer_offsets`,
`abs(javaHashCode(group.id)) % offsets.topic.num.partitions`, and is coordinated by
that partition's leader. Everything a group must remember is a record in that
partition (Kafka's key/value schemas, protocol/group_records.py); when this broker
becomes a partition's leader it replays the partition from its log start and the
groups come back, and until that finishes their requests get
COORDINATOR_LOAD_IN_PROGRESS. A write is answered only after the log took it.

The coordinator runtime (coordinator/runtime) does the leadership, loading, writes
and timers; each partition's groups are a shard on it (shard.py). The broker reaches
us through `OffsetsLog`: the runtime's log of the offsets partitions, and the topics.
Nothing here knows of sockets or the server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from odradek.coordinator.group import consumer_classic, migration, txn_offsets
from odradek.coordinator.group.classic import ClassicGroup, JoinResult, State, SyncResult
from odradek.coordinator.group.consumer import (
    ConsumerGroup,
    ConsumerMember,
    HeartbeatResult,
    TopicsView,
)
from odradek.coordinator.group.errors import GroupIdNotFound, InvalidGroupId
from odradek.coordinator.group.model import (
    Group,
    GroupConfig,
    OffsetAndMetadata,
    OffsetCommit,
    TopicPartition,
    now_ms,
)
from odradek.coordinator.group.shard import GroupShard
from odradek.coordinator.runtime import (
    CoordinatorLog,
    CoordinatorRuntime,
    CoordinatorTimer,
    ShardMaps,
)
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.group_records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_offset_commit_value,
)

log = logging.getLogger(__name__)

Record = tuple[bytes, bytes | None]


OFFSETS_TOPIC = "__consumer_offsets"


class OffsetsLog(CoordinatorLog, Protocol):
    """The `__consumer_offsets` partitions and the topics, as the broker offers them."""

    topics: TopicsView


def java_hash_code(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, 32-bit wrap-around)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    # Kafka's Utils.abs is `n & 0x7fffffff`, not Math.abs (which keeps MIN_VALUE negative)
    return (java_hash_code(group_id) & 0x7FFFFFFF) % partitions


def _is_classic(group: ConsumerGroup, member_id: str) -> bool:
    member = group.members.get(member_id)
    return member is not None and member.classic is not None


class GroupCoordinator:
    def __init__(self, config: GroupConfig, offsets_log: OffsetsLog) -> None:
        self.config = config
        self.log = offsets_log
        self.runtime: CoordinatorRuntime[GroupShard] = CoordinatorRuntime(
            OFFSETS_TOPIC, offsets_log, self._new_shard)
        self.runtime.every(config.offsets_retention_check_interval_ms, self.expire_offsets)

    def _new_shard(self, partition: int, timer: CoordinatorTimer) -> GroupShard:
        return GroupShard(partition, self.config, timer, self.runtime)

    def start(self) -> None:
        self.runtime.start()

    def stop(self) -> None:
        self.runtime.stop()

    # ---- partitions ---------------------------------------------------------------

    @property
    def led(self) -> set[int]:
        return self.runtime.led

    @property
    def loading(self) -> set[int]:
        return self.runtime.loading

    @property
    def groups(self) -> Mapping[str, Group]:
        """Every group of the partitions led here (a read-only view)."""
        return ShardMaps(lambda: [shard.groups for shard in self.runtime.all_shards()])

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_partitions)

    def follow(self, led: Iterable[int]) -> None:
        """This broker leads exactly these offsets partitions now."""
        self.runtime.follow(led)

    def on_elected(self, partitions: Iterable[int]) -> None:
        """This broker leads these offsets partitions now: load their groups."""
        self.runtime.on_elected(partitions)

    def on_resigned(self, partitions: Iterable[int]) -> None:
        self.runtime.on_resigned(partitions)

    def _check(self, group_id: str | None) -> GroupShard:
        """The shard of the group's partition, if it is served here (raises KafkaError)."""
        if not group_id:
            raise InvalidGroupId(f"invalid group id {group_id!r}")
        return self.runtime.shard(self.partition_for(group_id), f"group {group_id}")

    def group(self, group_id: str) -> Group | None:
        """The group, after checking this broker coordinates it (raises KafkaError)."""
        return self._check(group_id).groups.get(group_id)

    def classic_group(self, group_id: str, create: bool) -> ClassicGroup | None:
        """The classic group (an empty consumer group becomes one when `create`)."""
        shard = self._check(group_id)
        groups = shard.groups
        group = groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            if not group.is_empty():
                raise KafkaError(f"group {group_id} is a consumer group",
                                 ErrorCode.inconsistent_group_protocol)
            if not create:
                return None
            group = self._convert(shard, group, ClassicGroup(group_id, shard.partition, shard))
        if group is None and create:
            group = groups[group_id] = ClassicGroup(group_id, shard.partition, shard)
        assert group is None or isinstance(group, ClassicGroup)
        return group

    def consumer_group(self, group_id: str, create: bool = True) -> ConsumerGroup:
        """The consumer group; with `create` (a member joining with epoch 0) a missing or
        empty classic group is replaced and a non-empty one upgraded (migration.py)."""
        shard = self._check(group_id)
        group = shard.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return group
        if isinstance(group, ClassicGroup) and not group.is_empty() and \
                group.state != State.DEAD:
            if not create:
                raise GroupIdNotFound(f"Group {group_id} is not a consumer group.")
            migration.validate_upgrade(group, self.config)
            new = migration.upgrade(group, shard, self.log.topics)
            self._convert(shard, group, new)
        else:
            # Membership is not in the log here: after a coordinator move the members
            # come back with their old epochs to a group loaded empty, and must hear
            # UNKNOWN_MEMBER_ID (rejoin), not GROUP_ID_NOT_FOUND (fatal in librdkafka).
            if isinstance(group, ClassicGroup):
                group.remove_all()
            new = ConsumerGroup(group_id, shard.partition, shard)
            if group is not None:
                self._convert(shard, group, new)
            shard.groups[group_id] = new
        self._watch(shard, new)
        return new

    def _watch(self, shard: GroupShard, group: ConsumerGroup) -> None:
        """Downgrade the group when its last consumer-protocol member goes."""
        topics = self.log.topics

        def on_fence(g: ConsumerGroup, member: ConsumerMember) -> bool:
            if shard.groups.get(g.group_id) is not g or \
                    not migration.can_downgrade(g, member, self.config):
                return False
            classic = migration.downgrade(g, member, shard, topics)
            shard.groups[g.group_id] = classic
            classic.start_timers()
            shard.spawn(classic.store_quietly())
            classic.rebalance(f"Downgrade group {g.group_id} from consumer to classic for "
                              "member leaving.")
            return True

        def on_classic_only(g: ConsumerGroup) -> None:
            # a static classic member replaced the last consumer-protocol member: the
            # group turns classic with the assignment as it is, without a rebalance
            if shard.groups.get(g.group_id) is not g or \
                    not migration.can_downgrade(g, None, self.config):
                return
            classic = migration.downgrade(g, None, shard, topics)
            shard.groups[g.group_id] = classic
            classic.start_timers()
            shard.spawn(classic.store_quietly())

        group.on_fence = on_fence
        group.on_classic_only = on_classic_only

    @staticmethod
    def _convert(shard: GroupShard, old: Group, new: Group) -> Group:
        new.offsets = old.offsets
        new.pending_txn_offsets = old.pending_txn_offsets
        shard.groups[new.group_id] = new
        return new

    # ---- classic protocol ----------------------------------------------------------

    def join_group(self, group_id: str, member_id: str, instance_id: str | None,
                   client_id: str, client_host: str, session_timeout_ms: int,
                   rebalance_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], require_known_member_id: bool
                   ) -> JoinResult | asyncio.Future[JoinResult]:
        if not (self.config.min_session_timeout_ms <= session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return JoinResult(ErrorCode.invalid_session_timeout, member_id)
        current = self._check(group_id).groups.get(group_id)
        if isinstance(current, ConsumerGroup) and not current.is_empty():
            return consumer_classic.join(
                current, member_id, instance_id, client_id, client_host, session_timeout_ms,
                rebalance_timeout_ms, protocol_type, protocols, require_known_member_id,
                self.log.topics)
        group = self.classic_group(group_id, create=not member_id)
        if group is None:
            return JoinResult(ErrorCode.unknown_member_id, member_id)
        return group.join(member_id, instance_id, client_id, client_host, session_timeout_ms,
                          rebalance_timeout_ms, protocol_type, protocols,
                          require_known_member_id)

    def sync_group(self, group_id: str, member_id: str, instance_id: str | None,
                   generation: int, protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes]) -> SyncResult | asyncio.Future[SyncResult]:
        current = self._check(group_id).groups.get(group_id)
        if isinstance(current, ConsumerGroup):
            if current.is_empty():
                return SyncResult(ErrorCode.unknown_member_id)
            return consumer_classic.sync(current, member_id, instance_id, generation,
                                         protocol_type, protocol_name, self.log.topics)
        group = self.classic_group(group_id, create=False)
        if group is None:
            return SyncResult(ErrorCode.unknown_member_id)
        return group.sync(member_id, instance_id, generation, protocol_type, protocol_name,
                          assignments)

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                  generation: int) -> ErrorCode:
        current = self._check(group_id).groups.get(group_id)
        if isinstance(current, ConsumerGroup):
            return consumer_classic.heartbeat(current, member_id, instance_id, generation)
        group = self.classic_group(group_id, create=False)
        if group is None:
            return ErrorCode.unknown_member_id
        return group.heartbeat(member_id, instance_id, generation)

    def leave_group(self, group_id: str, members: Sequence[tuple[str, str | None]]
                    ) -> list[ErrorCode]:
        current = self._check(group_id).groups.get(group_id)
        if isinstance(current, ConsumerGroup):
            return consumer_classic.leave(current, members)
        group = self.classic_group(group_id, create=False)
        if group is None:
            return [ErrorCode.unknown_member_id for _ in members]
        return [group.leave(member_id, instance_id) for member_id, instance_id in members]

    # ---- consumer protocol ---------------------------------------------------------

    def consumer_heartbeat(self, group_id: str, member_id: str, epoch: int, **kw: Any
                           ) -> HeartbeatResult:
        if "consumer" not in self.config.protocols:
            # group.coordinator.rebalance.protocols leaves KIP-848 out, as Kafka 3.x did
            raise KafkaError("the consumer group protocol is disabled",
                             ErrorCode.unsupported_version)
        group = self.consumer_group(group_id, create=epoch == 0)
        return group.heartbeat(member_id, epoch, topics=self.log.topics, **kw)

    # ---- offsets --------------------------------------------------------------------

    def _validate_commit(self, group: Group | None, member_id: str, instance_id: str | None,
                         generation: int) -> ErrorCode | set[TopicPartition] | None:
        """None to accept any partition, a set to accept those, or the error for all."""
        if isinstance(group, ConsumerGroup):
            member = group.validate_commit(member_id, generation)
            if isinstance(member, ErrorCode) or member is None:
                return member
            return group.owned_partitions(member, self.log.topics)
        if group is None:
            return None if generation < 0 else ErrorCode.illegal_generation
        assert isinstance(group, ClassicGroup)
        if generation < 0 and group.state == State.EMPTY:
            return None  # a consumer that assigns itself its partitions
        if instance_id is not None and group.static.get(instance_id, member_id) != member_id:
            return ErrorCode.fenced_instance_id
        if group.state == State.DEAD:
            return ErrorCode.coordinator_not_available
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        if generation != group.generation:
            return ErrorCode.illegal_generation
        if group.state == State.COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        group.touch(member_id)
        return group.owned_partitions(member_id)

    async def commit_offsets(self, group_id: str, member_id: str, instance_id: str | None,
                             generation: int, commits: Sequence[OffsetCommit],
                             expire_timestamp: int = -1) -> dict[TopicPartition, ErrorCode]:
        try:
            group = self.group(group_id)
            if isinstance(group, ClassicGroup) and group.state == State.DEAD:
                group = None
            verdict = self._validate_commit(group, member_id, instance_id, generation)
        except KafkaError as e:
            return {(c.topic, c.partition): e.code for c in commits}
        if isinstance(verdict, ErrorCode):
            return {(c.topic, c.partition): verdict for c in commits}
        errors: dict[TopicPartition, ErrorCode] = {}
        records: list[Record] = []
        accepted: list[tuple[TopicPartition, OffsetAndMetadata]] = []
        now = now_ms()
        for c in commits:
            tp = (c.topic, c.partition)
            metadata = c.metadata or ""
            if len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                errors[tp] = ErrorCode.offset_metadata_too_large
            elif verdict is not None and tp not in verdict:
                # a member commits for a partition this generation gave someone else
                errors[tp] = (ErrorCode.stale_member_epoch if isinstance(group, ConsumerGroup)
                              and not _is_classic(group, member_id)
                              else ErrorCode.illegal_generation)
            else:
                value = OffsetAndMetadata(c.offset, c.leader_epoch, metadata, now,
                                          expire_timestamp)
                accepted.append((tp, value))
                records.append(self._offset_record(group_id, tp, value))
        if records:
            partition = self.partition_for(group_id)
            try:
                await self.runtime.write(partition, records,
                                         too_large=ErrorCode.invalid_commit_offset_size)
            except KafkaError as e:
                errors.update({tp: e.code for tp, _ in accepted})
                return errors
            target = self.target_group(self.runtime.shard(partition), group_id)
            for tp, value in accepted:
                target.offsets[tp] = value
                errors[tp] = ErrorCode.none
            txn_offsets.supersede(target, [tp for tp, _ in accepted])
        return errors

    async def commit_transactional_offsets(
            self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
            instance_id: str | None, generation: int, commits: Sequence[OffsetCommit]
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: offsets that count once the transaction commits."""
        try:
            shard = self._check(group_id)
        except KafkaError as e:
            return {(c.topic, c.partition): e.code for c in commits}
        group = shard.groups.get(group_id)
        if isinstance(group, ClassicGroup) and group.state == State.DEAD:
            group = None
        verdict = txn_offsets.validate(group, member_id, instance_id, generation)
        if verdict is not None:
            return {(c.topic, c.partition): verdict for c in commits}
        errors: dict[TopicPartition, ErrorCode] = {}
        accepted: list[tuple[TopicPartition, OffsetAndMetadata]] = []
        now = now_ms()
        for c in commits:
            tp = (c.topic, c.partition)
            metadata = c.metadata or ""
            if len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                errors[tp] = ErrorCode.offset_metadata_too_large
            else:
                accepted.append((tp, OffsetAndMetadata(c.offset, c.leader_epoch, metadata, now)))
        if not accepted:
            return errors
        records = [self._offset_record(group_id, tp, value) for tp, value in accepted]
        try:
            await self.runtime.write(shard.partition, records, producer_id=producer_id,
                                     producer_epoch=producer_epoch, transactional=True,
                                     too_large=ErrorCode.invalid_commit_offset_size)
        except KafkaError as e:
            errors.update({tp: e.code for tp, _ in accepted})
            return errors
        target = self.target_group(shard, group_id)
        pending = target.pending_txn_offsets.setdefault(producer_id, {})
        for tp, value in accepted:
            pending[tp] = value
            errors[tp] = ErrorCode.none
        return errors

    def complete_transaction(self, partition: int, producer_id: int, committed: bool) -> None:
        """The transaction coordinator wrote the producer's marker to this offsets
        partition: its pending offsets there are committed or dropped."""
        shard = self.runtime.active(partition)
        if shard is not None:
            txn_offsets.complete(shard.groups.values(), partition, producer_id, committed)

    def unstable_offsets(self, group_id: str) -> set[TopicPartition]:
        """Partitions of the group with offsets pending in an open transaction."""
        return txn_offsets.pending_partitions(self.groups.get(group_id))

    @staticmethod
    def target_group(shard: GroupShard, group_id: str) -> Group:
        """The group committed offsets go to: a new one if there is none (or a dead one)."""
        target = shard.groups.get(group_id)
        if target is None or (isinstance(target, ClassicGroup) and target.state == State.DEAD):
            target = shard.groups[group_id] = ClassicGroup(group_id, shard.partition, shard)
        return target

    @staticmethod
    def _offset_record(group_id: str, tp: TopicPartition, value: OffsetAndMetadata) -> Record:
        return (encode_key(OffsetCommitKey(group_id, tp[0], tp[1])),
                encode_offset_commit_value(OffsetCommitValue(
                    value.offset, value.metadata, value.commit_timestamp, value.leader_epoch,
                    value.expire_timestamp)))

    def fetch_offsets(self, group_id: str, partitions: Sequence[TopicPartition] | None,
                      member_id: str | None = None, member_epoch: int = -1
                      ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets (raises KafkaError for the whole group)."""
        group = self.group(group_id)
        if group is None:
            return {}
        if isinstance(group, ConsumerGroup) and member_id:
            member = group.validate_commit(member_id, member_epoch)
            if isinstance(member, ErrorCode):
                raise KafkaError(f"offset fetch by {member_id}", member)
        if partitions is None:
            return dict(group.offsets)
        return {tp: group.offsets[tp] for tp in partitions if tp in group.offsets}

    async def delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition]
                             ) -> dict[TopicPartition, ErrorCode]:
        group = self.group(group_id)
        if group is None or (isinstance(group, ClassicGroup) and group.state == State.DEAD):
            raise GroupIdNotFound(f"group {group_id} does not exist")
        subscribed = group.subscribed_topics()
        if subscribed is None and not group.is_empty():
            raise KafkaError(f"group {group_id} uses protocol it cannot inspect",
                             ErrorCode.non_empty_group)
        errors: dict[TopicPartition, ErrorCode] = {}
        records: list[Record] = []
        for tp in partitions:
            if subscribed and tp[0] in subscribed:
                errors[tp] = ErrorCode.group_subscribed_to_topic
            else:
                errors[tp] = ErrorCode.none
                if tp in group.offsets:
                    records.append((encode_key(OffsetCommitKey(group_id, *tp)), None))
        if records:
            await self.runtime.write(group.partition, records)
            for tp, code in errors.items():
                if code == ErrorCode.none:
                    group.offsets.pop(tp, None)
        return errors

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        out: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            try:
                group = self.group(group_id)
                if group is None or (isinstance(group, ClassicGroup)
                                     and group.state == State.DEAD):
                    raise GroupIdNotFound(f"group {group_id} does not exist")
                if not group.is_empty():
                    raise KafkaError(f"group {group_id} is not empty", ErrorCode.non_empty_group)
                await self._remove_group(group)
                out[group_id] = ErrorCode.none
            except KafkaError as e:
                out[group_id] = e.code
        return out

    async def _remove_group(self, group: Group) -> None:
        records: list[Record] = [(encode_key(OffsetCommitKey(group.group_id, *tp)), None)
                                 for tp in group.offsets]
        records.append((encode_key(GroupMetadataKey(group.group_id)), None))
        await self.runtime.write(group.partition, records)
        if isinstance(group, ClassicGroup | ConsumerGroup):
            group.remove_all()
        shard = self.runtime.active(group.partition)
        if shard is not None and shard.groups.get(group.group_id) is group:
            del shard.groups[group.group_id]

    # ---- listing ----------------------------------------------------------------------

    def list_groups(self) -> list[Group]:
        return [g for shard in self.runtime.active_shards() for g in shard.groups.values()
                if not (isinstance(g, ClassicGroup) and g.state == State.DEAD)]

    # ---- retention ----------------------------------------------------------------------

    async def expire_offsets(self, now: int | None = None) -> int:
        """Remove offsets past `offsets.retention.minutes` (KIP-211), and the groups that
        are left empty with none. Returns how many offsets went."""
        now = now_ms() if now is None else now
        retention = self.config.offsets_retention_ms
        removed = 0
        for group in self.list_groups():
            subscribed = group.subscribed_topics()
            expired = []
            for tp, value in group.offsets.items():
                if value.expire_timestamp >= 0:
                    due = now >= value.expire_timestamp
                elif group.is_empty():
                    base = max(group.current_state_timestamp, value.commit_timestamp)
                    due = now >= base + retention
                else:
                    due = subscribed is not None and tp[0] not in subscribed and \
                        now >= value.commit_timestamp + retention
                if due:
                    expired.append(tp)
            if expired:
                await self.runtime.write(group.partition, [
                    (encode_key(OffsetCommitKey(group.group_id, *tp)), None) for tp in expired])
                for tp in expired:
                    group.offsets.pop(tp, None)
                removed += len(expired)
                log.info("expired %d offsets of group %s", len(expired), group.group_id)
            if group.is_empty() and not group.offsets and (
                    not isinstance(group, ClassicGroup) or group.state == State.EMPTY):
                await self._remove_group(group)
        return removed

