"""The group and transaction coordinators as shards of the runtime, on real partitions:
a record a client fuzzed into `__consumer_offsets` or `__transaction_state` is skipped
(issue 11 saw one fail a whole load), and a loaded group's session timers belong to
its partition."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from odradek.coordinator.group import GroupConfig, GroupCoordinator, OffsetCommit
from odradek.coordinator.group.consumer import TopicsView
from odradek.coordinator.runtime import ReplicaLog
from odradek.coordinator.txn import TransactionCoordinator, TxnConfig, TxnState
from odradek.protocol.errors import ErrorCode
from odradek.protocol.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    encode_group_metadata_value,
    encode_key,
)
from odradek.protocol.records import NewRecord, encode_batch
from tests.coordinator.conftest import Replicas

OFFSETS, TXN_STATE = "__consumer_offsets", "__transaction_state"


class OffsetsLog(ReplicaLog):
    def __init__(self, replicas: Replicas) -> None:
        super().__init__(replicas, OFFSETS, lambda: 5000)
        self.topics = TopicsView(lambda name: (uuid.UUID(int=1), 1), lambda _id: "t",
                                 lambda: ["t"])


def garbage() -> bytearray:
    return bytearray(encode_batch([NewRecord(key=b"garbage-key", value=b"garbage-value")]))


async def until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.001)
    await asyncio.wait_for(poll(), timeout)


def test_a_fuzzed_offsets_record_does_not_keep_the_groups_from_loading(
        replicas: Replicas) -> None:
    config = GroupConfig(offsets_partitions=1)
    p = replicas.add(OFFSETS, 0)

    async def go() -> None:
        first = GroupCoordinator(config, OffsetsLog(replicas))
        first.on_elected([0])
        await until(lambda: not first.loading)
        assert await first.commit_offsets("g", "", None, -1, [OffsetCommit("t", 0, 5)]) \
            == {("t", 0): ErrorCode.none}
        first.on_resigned([0])
        p.append(garbage())  # as a client could produce it before issue 11's fix
        second = GroupCoordinator(config, OffsetsLog(replicas))
        second.on_elected([0])
        await until(lambda: not second.loading)
        assert second.led == {0}
        assert second.fetch_offsets("g", None)[("t", 0)].offset == 5
        assert await second.commit_offsets("g", "", None, -1, [OffsetCommit("t", 0, 6)]) \
            == {("t", 0): ErrorCode.none}
        second.stop()

    asyncio.run(go())


def test_a_loaded_groups_session_timers_belong_to_its_partition(replicas: Replicas) -> None:
    config = GroupConfig(offsets_partitions=1)
    p = replicas.add(OFFSETS, 0)
    member = MemberMetadata("m-1", "client", "/127.0.0.1", 60_000, 60_000, b"", b"")
    p.append(bytearray(encode_batch([NewRecord(
        key=encode_key(GroupMetadataKey("g")),
        value=encode_group_metadata_value(
            GroupMetadataValue("consumer", 3, "range", "m-1", -1, (member,))))])))

    async def go() -> None:
        coordinator = GroupCoordinator(config, OffsetsLog(replicas))
        coordinator.on_elected([0])
        await until(lambda: not coordinator.loading)
        group: Any = coordinator.group("g")
        assert group.generation == 3 and list(group.members) == ["m-1"]
        timer = coordinator.runtime.contexts[0].timer
        assert len(timer) == 1  # the member's session: expires unless it comes back
        coordinator.on_resigned([0])
        assert len(timer) == 0
        coordinator.stop()

    asyncio.run(go())


class Markers:
    async def write_markers(self, producer_id: int, producer_epoch: int,
                            coordinator_epoch: int, commit: bool, partitions: Any
                            ) -> dict[tuple[str, int], ErrorCode]:
        return {tp: ErrorCode.none for tp in partitions}


def test_a_fuzzed_transaction_state_record_does_not_keep_the_ids_from_loading(
        replicas: Replicas) -> None:
    p = replicas.add(TXN_STATE, 0)
    ids = iter(range(1000, 2000))

    async def allocate_producer_id() -> int:
        return next(ids)

    def coordinator() -> TransactionCoordinator:
        return TransactionCoordinator(TxnConfig(partitions=1),
                                      ReplicaLog(replicas, TXN_STATE, lambda: 5000),
                                      Markers(), allocate_producer_id)

    async def go() -> None:
        first = coordinator()
        first.on_elected([0])
        await until(lambda: not first.loading)
        code, pid, epoch = await first.init_producer_id("t", 60_000)
        assert code == ErrorCode.none
        assert await first.add_partitions("t", pid, epoch, {("a", 0)}) == ErrorCode.none
        first.stop()
        p.append(garbage())
        second = coordinator()
        second.on_elected([0])
        await until(lambda: not second.loading)
        assert second.txns["t"].state == TxnState.ONGOING
        # markers carry the partition's leader epoch as the coordinator epoch
        assert second.runtime.leader_epoch(0) == 7
        assert await second.end_txn("t", pid, epoch, commit=True) == ErrorCode.none
        second.stop()

    asyncio.run(go())
