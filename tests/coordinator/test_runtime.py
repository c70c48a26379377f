"""The coordinator runtime on real partitions: leadership, load and replay, unreadable
records skipped, writes with acks=all, timers and periodic jobs.

The state machine here is a small key → int map; the group and transaction
coordinators are the same kind of shard (tests/groups, tests/transactions).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from odradek.coordinator.runtime import (
    CoordinatorRuntime,
    CoordinatorTimer,
    PartitionState,
    ReplicaLog,
)
from odradek.protocol.batch import BatchHeader
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import NewRecord, Record, encode_batch
from tests.coordinator.conftest import TOPIC, Replicas, replica_log


class CounterShard:
    """key → int; a value that is not a number cannot be read."""

    def __init__(self, partition: int, timer: CoordinatorTimer) -> None:
        self.partition = partition
        self.timer = timer
        self.values: dict[bytes, int] = {}
        self.pending: dict[int, dict[bytes, int]] = {}  # producer → its open transaction
        self.loaded = asyncio.Event()
        self.unloaded = False
        self.fired: list[str] = []

    def replay(self, batch: BatchHeader, record: Record) -> None:
        assert record.key is not None
        if record.value is None:
            self.values.pop(record.key, None)
        elif batch.is_transactional:
            self.pending.setdefault(batch.producer_id, {})[record.key] = int(record.value)
        else:
            self.values[record.key] = int(record.value)

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        done = self.pending.pop(producer_id, {})
        if commit:
            self.values.update(done)

    def on_loaded(self) -> None:
        self.loaded.set()

    def on_unloaded(self) -> None:
        self.unloaded = True


def new_runtime(log: ReplicaLog) -> CoordinatorRuntime[CounterShard]:
    return CoordinatorRuntime(TOPIC, log, CounterShard)


def batch(*records: tuple[bytes, bytes | None], **kw: Any) -> bytearray:
    return bytearray(encode_batch([NewRecord(key=k, value=v) for k, v in records], **kw))


async def until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait for a state (never for a fixed time)."""
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.001)
    await asyncio.wait_for(poll(), timeout)


async def served(runtime: CoordinatorRuntime[CounterShard], p: int = 0) -> CounterShard:
    await until(lambda: runtime.active(p) is not None or p not in runtime.contexts)
    return runtime.shard(p)


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(coro)  # type: ignore[arg-type]


def code_of(fn: Callable[[], Any]) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        fn()
    return info.value.code


def test_an_elected_partition_replays_its_log_to_the_end_then_serves(
        replicas: Replicas) -> None:
    p = replicas.add(TOPIC, 0)
    p.append(batch((b"a", b"1"), (b"b", b"2")))
    p.append(batch((b"a", b"3"), (b"b", None)))  # a later value wins; a tombstone removes
    p.append(batch((b"t", b"9"), producer_id=5, producer_epoch=0, base_sequence=0,
                   transactional=True))
    p.append_marker(producer_id=5, producer_epoch=0, coordinator_epoch=0, commit=True)
    p.append(batch((b"u", b"8"), producer_id=6, producer_epoch=0, base_sequence=0,
                   transactional=True))  # still open at the log end

    async def go() -> None:
        runtime = new_runtime(replica_log(replicas))
        assert code_of(lambda: runtime.shard(0)) == ErrorCode.not_coordinator
        runtime.on_elected([0])
        assert code_of(lambda: runtime.shard(0)) == ErrorCode.coordinator_load_in_progress
        shard = await served(runtime)
        assert shard.values == {b"a": 3, b"t": 9}
        assert shard.pending == {6: {b"u": 8}}
        assert code_of(lambda: runtime.shard(1)) == ErrorCode.not_coordinator
        runtime.stop()
        assert shard.unloaded and not runtime.led

    run(go())


def test_unreadable_batches_and_records_are_logged_and_skipped(
        replicas: Replicas, caplog: pytest.LogCaptureFixture) -> None:
    p = replicas.add(TOPIC, 0)
    first = batch((b"a", b"1"))
    p.append(first)
    p.append(batch((b"b", b"2"), (b"c", b"3")))  # its bytes get damaged on disk below
    p.append(batch((b"d", b"garbage-value"), (b"e", b"5")))  # one record it cannot read
    p.append(batch((b"f", b"6")))
    p.log.flush()
    segment = p.log.directory / "00000000000000000000.log"
    fd = os.open(segment, os.O_RDWR)
    try:
        at = len(first) + 70  # inside the second batch's records: its CRC fails
        os.pwrite(fd, bytes(b ^ 0xFF for b in os.pread(fd, 4, at)), at)
    finally:
        os.close(fd)

    async def go() -> None:
        runtime = new_runtime(replica_log(replicas))
        with caplog.at_level(logging.WARNING, "odradek.coordinator.runtime"):
            runtime.on_elected([0])
            shard = await served(runtime)
        assert shard.values == {b"a": 1, b"e": 5, b"f": 6}
        warnings = [r.getMessage() for r in caplog.records]
        assert any("unreadable batch" in w and "offsets 1-2" in w for w in warnings)
        assert any("unreadable record" in w and "offset 3" in w for w in warnings)
        runtime.stop()

    run(go())


def test_a_write_returns_once_every_in_sync_replica_has_it(replicas: Replicas) -> None:
    p = replicas.add(TOPIC, 0, followers=(1,))

    async def go() -> None:
        runtime = new_runtime(replica_log(replicas))
        runtime.on_elected([0])
        await served(runtime)
        write = asyncio.ensure_future(runtime.write(0, [(b"k", b"1")]))
        await until(lambda: p.log.log_end_offset == 1)
        await asyncio.sleep(0)
        assert not write.done()  # in the leader's log, not yet in the follower's
        p.on_follower_fetch(1, p.log.log_end_offset, 0)
        await asyncio.wait_for(write, 10)
        assert p.high_watermark == 1
        runtime.stop()

    run(go())


def test_a_write_the_isr_does_not_confirm_in_time_asks_the_client_to_retry(
        replicas: Replicas) -> None:
    replicas.add(TOPIC, 0, followers=(1,))

    async def go() -> None:
        runtime = new_runtime(replica_log(replicas, timeout_ms=20))
        runtime.on_elected([0])
        await served(runtime)
        with pytest.raises(KafkaError) as info:
            await runtime.write(0, [(b"k", b"1")])
        assert info.value.code == ErrorCode.coordinator_not_available
        runtime.stop()

    run(go())


def test_a_write_after_leadership_moved_answers_not_coordinator(replicas: Replicas) -> None:
    p = replicas.add(TOPIC, 0, followers=(1,))

    async def go() -> None:
        runtime = new_runtime(replica_log(replicas))
        runtime.on_elected([0])
        await served(runtime)
        # resigned while the write waits for the ISR: the caller must not apply it
        write = asyncio.ensure_future(runtime.write(0, [(b"k", b"1")]))
        await until(lambda: p.log.log_end_offset == 1)
        runtime.on_resigned([0])
        p.on_follower_fetch(1, p.log.log_end_offset, 0)
        with pytest.raises(KafkaError) as info:
            await write
        assert info.value.code == ErrorCode.not_coordinator
        # the log's own refusal (no longer its leader) reads the same to the client
        runtime.on_elected([0])
        await served(runtime)
        p.is_leader = False
        with pytest.raises(KafkaError) as info:
            await runtime.write(0, [(b"k", b"2")])
        assert info.value.code == ErrorCode.not_coordinator
        runtime.stop()

    run(go())


def test_a_new_leader_loads_what_the_old_one_wrote(replicas: Replicas) -> None:
    replicas.add(TOPIC, 0)
    replicas.add(TOPIC, 1)

    async def go() -> None:
        old, new = new_runtime(replica_log(replicas)), new_runtime(replica_log(replicas))
        old.follow({0, 1})
        await served(old, 0)
        await served(old, 1)
        await old.write(1, [(b"k", b"41")])
        await old.write(1, [(b"k", b"42")])
        old.follow({0})  # partition 1 moves to the other broker
        assert code_of(lambda: old.shard(1)) == ErrorCode.not_coordinator
        assert old.shard(0).values == {}
        new.follow({1})
        assert (await served(new, 1)).values == {b"k": 42}
        old.stop()
        new.stop()

    run(go())


def test_timers_fire_by_key_and_die_with_their_partition(replicas: Replicas) -> None:
    replicas.add(TOPIC, 0)

    async def go() -> None:
        runtime = new_runtime(replica_log(replicas))
        runtime.on_elected([0])
        shard = await served(runtime)
        timer = shard.timer
        timer.schedule("session", 60_000, lambda: shard.fired.append("first"))
        timer.schedule("session", 1, lambda: shard.fired.append("second"))  # replaces it
        await until(lambda: shard.fired == ["second"])
        assert not timer.is_scheduled("session")
        timer.schedule("expiry", 60_000, lambda: shard.fired.append("expiry"))
        assert len(timer) == 1
        runtime.on_resigned([0])
        assert len(timer) == 0  # cancelled with the partition
        timer.schedule("late", 0, lambda: shard.fired.append("late"))
        assert not timer.is_scheduled("late")  # an unloaded shard schedules nothing
        runtime.stop()

    run(go())


def test_periodic_jobs_run_from_start_to_stop(replicas: Replicas) -> None:
    replicas.add(TOPIC, 0)

    async def go() -> None:
        runtime = new_runtime(replica_log(replicas))
        runs: list[int] = []

        async def job() -> None:
            runs.append(len(runs))
            if len(runs) == 1:
                raise RuntimeError("a failing run does not end the job")

        runtime.every(1, job)
        runtime.start()
        await until(lambda: len(runs) >= 3)
        runtime.stop()
        stopped = len(runs)
        await until(lambda: not runtime._tasks)  # the job's task is cancelled and gone
        assert len(runs) == stopped

    run(go())


def test_a_partition_whose_log_cannot_be_read_is_not_served(replicas: Replicas) -> None:
    async def go() -> None:
        runtime = new_runtime(replica_log(replicas))  # no partition 3 in the replicas
        runtime.on_elected([3])
        await until(lambda: 3 not in runtime.contexts)
        assert code_of(lambda: runtime.shard(3)) == ErrorCode.not_coordinator
        runtime.stop()

    run(go())


def test_loading_state_is_reported_per_partition(replicas: Replicas) -> None:
    replicas.add(TOPIC, 0)

    async def go() -> None:
        runtime = new_runtime(replica_log(replicas))
        runtime.on_elected([0])
        assert runtime.contexts[0].state is PartitionState.LOADING
        assert runtime.loading == {0} and runtime.led == {0}
        await served(runtime)
        assert runtime.loading == set()
        runtime.stop()

    run(go())
