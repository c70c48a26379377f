"""The share coordinator on a real partition of `__share_group_state`: Kafka's record
schemas, snapshots and updates merged, a reload that finds the same state, and the
epochs that fence an old leader or an old state."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from odradek.coordinator.share.state import (
    SHARE_STATE_TOPIC,
    ShareStateCoordinator,
    combine,
    coordinator_key,
)
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.share_state_records import (
    SNAPSHOT,
    UPDATE,
    ShareStateKey,
    StateBatch,
    StateValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from tests.coordinator.conftest import Replicas, replica_log

TOPIC_ID = uuid.UUID("5b5a6c3e-0f7a-4f5e-9a0e-2c4d1b7e8f90")
AVAILABLE, ACKED, ARCHIVED = 0, 2, 4


def B(first: int, last: int, state: int, count: int) -> StateBatch:
    return StateBatch(first, last, state, count)


async def until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.001)
    await asyncio.wait_for(poll(), timeout)


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_keys_and_values_are_kafkas_bytes() -> None:
    key = ShareStateKey(UPDATE, "g", TOPIC_ID, 3)
    raw = encode_key(key)
    # int16 record type 1, int16-length string, 16-byte uuid, int32 partition
    assert raw == b"\x00\x01\x00\x01g" + TOPIC_ID.bytes + b"\x00\x00\x00\x03"
    assert decode_key(raw) == key
    assert decode_key(b"\x00\x05\x00\x00") is None  # another coordinator's record type
    value = StateValue(2, 7, 100, (B(100, 104, ACKED, 1), B(105, 105, AVAILABLE, 3)),
                       state_epoch=1, create_ms=5, write_ms=6)
    assert decode_value(SNAPSHOT, encode_value(SNAPSHOT, value)) == value
    update = StateValue(2, 7, -1, (B(1, 1, ARCHIVED, 5),))
    assert decode_value(UPDATE, encode_value(UPDATE, update)) == update
    # value version 0, flexible: int32 snapshot epoch first, an empty tagged-field
    # section at the end
    assert encode_value(UPDATE, update)[:6] == b"\x00\x00\x00\x00\x00\x02"
    assert encode_value(UPDATE, update)[-1:] == b"\x00"


def test_the_coordinator_key_is_kafkas() -> None:
    # SharePartitionKey.asCoordinatorKey: group:topicId(base64url, unpadded):partition
    assert coordinator_key("g", TOPIC_ID, 3) == "g:W1psPg96T16aDixNG36PkA:3"


def test_new_batches_win_where_they_overlap_and_nothing_stays_below_the_start() -> None:
    current = (B(10, 19, AVAILABLE, 1),)
    assert combine(current, [B(12, 13, ACKED, 1)], 10) == (
        B(10, 11, AVAILABLE, 1), B(12, 13, ACKED, 1), B(14, 19, AVAILABLE, 1))
    assert combine(current, [B(10, 14, ACKED, 1)], 15) == (B(15, 19, AVAILABLE, 1),)
    # neighbours in the same state and count are one batch
    assert combine((B(0, 4, ACKED, 1),), [B(5, 9, ACKED, 1)], 0) == (B(0, 9, ACKED, 1),)


def test_state_written_as_snapshot_and_updates_is_read_back_after_a_reload(
        tmp_path: Path) -> None:
    replicas = Replicas(tmp_path)
    replicas.add(SHARE_STATE_TOPIC, 0)
    key = ("g", TOPIC_ID, 0)

    async def go() -> None:
        state = ShareStateCoordinator(replica_log(replicas, SHARE_STATE_TOPIC), 1,
                                      updates_per_snapshot=2)
        assert state.partition_for(*key) == 0
        state.follow([0])
        await until(lambda: state.runtime.active(0) is not None)
        assert state.read(key, 0).start_offset == -1  # no state yet
        await state.write(key, 0, 0, 0, [B(0, 9, AVAILABLE, 1)])
        await state.write(key, 0, 0, -1, [B(0, 3, ACKED, 1)])
        await state.write(key, 0, 0, 4, [B(5, 5, ARCHIVED, 2)])
        await state.write(key, 0, 0, -1, [B(6, 6, ACKED, 1)])  # a new snapshot
        await state.write(key, 0, 1, -1, [B(7, 7, AVAILABLE, 2)])
        expected = (B(4, 4, AVAILABLE, 1), B(5, 5, ARCHIVED, 2), B(6, 6, ACKED, 1),
                    B(7, 7, AVAILABLE, 2), B(8, 9, AVAILABLE, 1))
        read = state.read(key, 1)
        assert (read.start_offset, read.batches) == (4, expected)
        state.stop()

        again = ShareStateCoordinator(replica_log(replicas, SHARE_STATE_TOPIC), 1)
        again.follow([0])
        await until(lambda: again.runtime.active(0) is not None)
        read = again.read(key, 1)
        assert (read.start_offset, read.batches, read.leader_epoch) == (4, expected, 1)
        # an older leader is fenced, once a newer one read the state
        with pytest.raises(KafkaError) as info:
            await again.write(key, 0, 0, -1, [])
        assert info.value.code == ErrorCode.fenced_leader_epoch
        await again.delete(key)
        assert again.read(key, 2).start_offset == -1
        again.stop()

        third = ShareStateCoordinator(replica_log(replicas, SHARE_STATE_TOPIC), 1)
        third.follow([0])
        await until(lambda: third.runtime.active(0) is not None)
        assert third.read(key, 2).start_offset == -1, "a deleted state came back"
        third.stop()

    try:
        run(go())
    finally:
        replicas.close()


def last_pruned_metric(state: ShareStateCoordinator) -> float | None:
    """Kafka's share-coordinator-metrics last-pruned-offset, as the broker exports it."""
    from types import SimpleNamespace

    from prometheus_client import CollectorRegistry

    from odradek.server.share_metrics import ShareMetrics

    registry = CollectorRegistry()
    shares = SimpleNamespace(coordinator=SimpleNamespace(list_groups=lambda: []),
                             partitions=SimpleNamespace(partitions={}, sessions=()),
                             state=state)
    ShareMetrics(registry).refresh(shares)  # type: ignore[arg-type]
    return registry.get_sample_value(
        "kafka_server_share_coordinator_metrics_last_pruned_offset",
        {"topic": SHARE_STATE_TOPIC, "partition": "0"})


def test_pruning_keeps_each_share_partitions_latest_snapshot_and_what_follows(
        tmp_path: Path) -> None:
    """Kafka's rule: a state partition is cut below the oldest of its share-partitions'
    latest snapshots — an idle share-partition holds it back — and a reload finds every
    state as it was."""
    from odradek.replication.partition import Partition
    from odradek.storage.log import Log
    from odradek.storage.log_config import LogConfig
    from odradek.storage.retention import delete_records

    replicas = Replicas(tmp_path)
    # as the broker creates it: cleanup.policy=delete, no retention
    log = Log.open(tmp_path / f"{SHARE_STATE_TOPIC}-0", LogConfig(cleanup_policy=("delete",)))
    partition = Partition(SHARE_STATE_TOPIC, 0, uuid.uuid4(), log, leader_epoch=7,
                          node_id=0, leader=0)
    replicas.partitions[(SHARE_STATE_TOPIC, 0)] = partition
    busy, idle = ("g", TOPIC_ID, 0), ("g", TOPIC_ID, 1)

    def prune_to(p: int, offset: int) -> int:
        return delete_records(replicas.partitions[(SHARE_STATE_TOPIC, p)].log, offset)

    def coordinator() -> ShareStateCoordinator:
        return ShareStateCoordinator(replica_log(replicas, SHARE_STATE_TOPIC), 1,
                                     updates_per_snapshot=1, delete_records=prune_to)

    async def go() -> None:
        state = coordinator()
        state.follow([0])
        await until(lambda: state.runtime.active(0) is not None)
        await state.write(busy, 0, 0, 0, [B(0, 9, AVAILABLE, 1)])  # snapshot at 0
        await state.write(idle, 0, 0, 0, [B(0, 4, AVAILABLE, 1)])  # snapshot at 1
        await state.write(busy, 0, 0, 2, [B(2, 2, ACKED, 1)])  # update at 2
        await state.write(busy, 0, 0, 3, [B(3, 3, ACKED, 1)])  # snapshot at 3
        await state.prune()
        assert partition.log.log_start_offset == 1, "the idle one's snapshot must stay"
        await state.write(idle, 0, 0, 1, [])  # update at 4
        await state.write(idle, 0, 0, 2, [B(2, 2, ARCHIVED, 1)])  # snapshot at 5
        await state.prune()
        assert partition.log.log_start_offset == 3  # the busy one's latest snapshot
        await state.prune()  # nothing moved: nothing asked
        assert state.last_pruned == {0: 3}
        assert last_pruned_metric(state) == 3
        expected = {k: (state.read(k, 0).start_offset, state.read(k, 0).batches)
                    for k in (busy, idle)}
        state.stop()

        again = coordinator()
        again.follow([0])
        await until(lambda: again.runtime.active(0) is not None)
        assert {k: (again.read(k, 0).start_offset, again.read(k, 0).batches)
                for k in (busy, idle)} == expected
        await again.delete(busy)  # its records no longer hold the cut back
        await again.prune()
        assert partition.log.log_start_offset == 5
        again.stop()

        third = coordinator()
        third.follow([0])
        await until(lambda: third.runtime.active(0) is not None)
        assert third.read(busy, 0).start_offset == -1
        assert (third.read(idle, 0).start_offset, third.read(idle, 0).batches) == \
            expected[idle]
        third.stop()

    try:
        run(go())
    finally:
        replicas.close()
