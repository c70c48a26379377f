"""The transaction coordinator's state machine, against an in-memory log and markers.

Kafka's answers for each bad input, the fencing rules, the timers, the replay of
`__transaction_state`, and the rule that no failure leaves an id stuck.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from odradek.coordinator.txn import TransactionCoordinator, TxnConfig, TxnState
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import NewRecord, encode_batch
from odradek.protocol.txn_records import TxnLogValue, decode_key, decode_value

TopicPartition = tuple[str, int]
A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


class MemoryLog:
    """`__transaction_state` partitions as lists of (key, value)."""

    def __init__(self) -> None:
        self.records: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.fail_with: ErrorCode | None = None

    async def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]],
                     **_: Any) -> None:
        if self.fail_with is not None:
            raise KafkaError("injected", self.fail_with)
        self.records.setdefault(partition, []).extend(records)

    def read(self, partition: int, offset: int, max_bytes: int) -> tuple[bytes, int]:
        records = self.records.get(partition, [])
        data = b"".join(encode_batch([NewRecord(key=k, value=v)], base_offset=i)
                        for i, (k, v) in enumerate(records) if i >= offset)
        return data, len(records)

    def log_start_offset(self, partition: int) -> int:
        return 0

    def leader_epoch(self, partition: int) -> int:
        return 3

    def states(self, transactional_id: str) -> list[TxnLogValue | None]:
        return [None if v is None else decode_value(v) for rs in self.records.values()
                for k, v in rs if decode_key(k) == transactional_id]


class Markers:
    def __init__(self) -> None:
        self.written: list[tuple[int, int, int, bool, TopicPartition]] = []
        self.failing: dict[TopicPartition, ErrorCode] = {}

    async def write_markers(self, producer_id: int, producer_epoch: int,
                            coordinator_epoch: int, commit: bool,
                            partitions: Iterable[TopicPartition]
                            ) -> dict[TopicPartition, ErrorCode]:
        out = {}
        for tp in partitions:
            out[tp] = self.failing.get(tp, ErrorCode.none)
            if out[tp] == ErrorCode.none:
                self.written.append((producer_id, producer_epoch, coordinator_epoch, commit, tp))
        return out


class Clock:
    now = 1_000_000

    def __call__(self) -> int:
        return self.now


def make(config: TxnConfig | None = None, log: MemoryLog | None = None
         ) -> tuple[TransactionCoordinator, MemoryLog, Markers, Clock]:
    log = log or MemoryLog()
    markers, clock = Markers(), Clock()
    ids = iter(range(1000, 2000))

    async def next_id() -> int:
        return next(ids)

    coordinator = TransactionCoordinator(config or TxnConfig(partitions=4), log, markers,
                                         next_id, clock)
    return coordinator, log, markers, clock


async def loaded(coordinator: TransactionCoordinator) -> None:
    coordinator.on_elected(range(coordinator.config.partitions))
    while coordinator.loading:
        await asyncio.sleep(0)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_full_transaction_writes_kafkas_records_and_markers() -> None:
    async def go() -> None:
        c, log, markers, _ = make()
        await loaded(c)
        code, pid, epoch = await c.init_producer_id("t", 60000)
        assert (code, pid, epoch) == (ErrorCode.none, 1000, 0)
        assert await c.add_partitions("t", pid, epoch, {A0, B0}) == ErrorCode.none
        assert await c.add_partitions("t", pid, epoch, {A1}) == ErrorCode.none
        assert c.verify("t", pid, epoch, A1) == ErrorCode.none
        assert c.verify("t", pid, epoch, ("c", 0)) == ErrorCode.invalid_txn_state
        assert await c.end_txn("t", pid, epoch, commit=True) == ErrorCode.none
        assert sorted(m[4] for m in markers.written) == [A0, A1, B0]
        assert {m[:4] for m in markers.written} == {(1000, 0, 3, True)}
        states = [v.status for v in log.states("t") if v is not None]
        assert states == [TxnState.EMPTY, TxnState.ONGOING, TxnState.ONGOING,
                          TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT]
        prepare = log.states("t")[3]
        assert prepare is not None and prepare.partitions == {"a": (0, 1), "b": (0,)}
        empty = log.states("t")[0]
        assert empty is not None and empty.partitions is None  # Kafka writes null for Empty
        # a retried EndTxn of a completed commit succeeds; the other outcome does not
        assert await c.end_txn("t", pid, epoch, commit=True) == ErrorCode.none
        assert await c.end_txn("t", pid, epoch, commit=False) == ErrorCode.invalid_txn_state

    run(go())


def test_bad_input_gets_kafkas_error_codes() -> None:
    async def go() -> None:
        c, _, _, _ = make(TxnConfig(partitions=4, max_timeout_ms=60000))
        assert (await c.init_producer_id("t", 1000))[0] == ErrorCode.not_coordinator
        await loaded(c)
        assert (await c.init_producer_id("", 1000))[0] == ErrorCode.invalid_request
        assert (await c.init_producer_id("t", 60001))[0] == ErrorCode.invalid_transaction_timeout
        assert (await c.init_producer_id("t", 0))[0] == ErrorCode.invalid_transaction_timeout
        _, pid, epoch = await c.init_producer_id("t", 1000)
        assert await c.add_partitions("nope", pid, epoch, {A0}) == \
            ErrorCode.invalid_producer_id_mapping
        assert await c.add_partitions("t", pid + 1, epoch, {A0}) == \
            ErrorCode.invalid_producer_id_mapping
        assert await c.add_partitions("t", pid, epoch + 1, {A0}) == ErrorCode.producer_fenced
        assert await c.end_txn("t", pid, epoch, commit=True) == ErrorCode.invalid_txn_state
        assert await c.end_txn("nope", pid, epoch, commit=True) == \
            ErrorCode.invalid_producer_id_mapping
        assert c.verify("t", pid, epoch, A0) == ErrorCode.invalid_txn_state
        assert c.describe("nope") == (ErrorCode.transactional_id_not_found, None)
        # a producer that asks to bump an epoch it never had (KIP-360) is fenced
        assert (await c.init_producer_id("t", 1000, (pid, epoch + 5)))[0] == \
            ErrorCode.producer_fenced

    run(go())


def test_init_producer_id_fences_an_open_transaction() -> None:
    async def go() -> None:
        c, log, markers, _ = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 60000)
        await c.add_partitions("t", pid, epoch, {A0})
        code, pid2, epoch2 = await c.init_producer_id("t", 60000)
        # the open transaction was aborted with the fenced epoch (1), the new producer
        # got the next one (2)
        assert (code, pid2, epoch2) == (ErrorCode.none, pid, 2)
        assert markers.written == [(pid, 1, 3, False, A0)]
        assert await c.add_partitions("t", pid, epoch, {A0}) == ErrorCode.producer_fenced
        assert await c.end_txn("t", pid, epoch, commit=True) == ErrorCode.producer_fenced
        assert c.verify("t", pid, epoch, A0) == ErrorCode.producer_fenced
        assert [v.status for v in log.states("t") if v is not None][-3:] == [
            TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT, TxnState.EMPTY]

    run(go())


def test_kip360_producer_bumps_its_own_epoch_and_retries_are_idempotent() -> None:
    async def go() -> None:
        c, _, _, _ = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 60000)
        code, _, bumped = await c.init_producer_id("t", 60000, (pid, epoch))
        assert (code, bumped) == (ErrorCode.none, epoch + 1)
        # the same request again (its answer was lost): the same epoch, no second bump
        assert await c.init_producer_id("t", 60000, (pid, epoch)) == (
            ErrorCode.none, pid, epoch + 1)

    run(go())


def test_epoch_exhaustion_rotates_the_producer_id() -> None:
    async def go() -> None:
        c, _, _, _ = make()
        await loaded(c)
        _, pid, _ = await c.init_producer_id("t", 60000)
        c.txns["t"].producer_epoch = 32766
        code, new_pid, epoch = await c.init_producer_id("t", 60000)
        assert code == ErrorCode.none and new_pid != pid and epoch == 0

    run(go())


def test_a_timed_out_transaction_is_fenced_and_aborted() -> None:
    async def go() -> None:
        c, _, markers, clock = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 5000)
        await c.add_partitions("t", pid, epoch, {A0})
        clock.now += 5000
        assert await c.abort_timed_out() == 0  # not past it yet
        clock.now += 1
        assert await c.abort_timed_out() == 1
        assert c.txns["t"].state == TxnState.COMPLETE_ABORT
        assert markers.written == [(pid, epoch + 1, 3, False, A0)]
        # the producer learns it was fenced; a new InitProducerId gets on with it
        assert await c.end_txn("t", pid, epoch, commit=True) == ErrorCode.producer_fenced
        assert (await c.init_producer_id("t", 5000, (pid, epoch)))[0] == \
            ErrorCode.producer_fenced
        assert await c.init_producer_id("t", 5000) == (ErrorCode.none, pid, epoch + 2)

    run(go())


def test_idle_transactional_ids_expire() -> None:
    async def go() -> None:
        c, log, _, clock = make(TxnConfig(partitions=4, id_expiration_ms=10_000))
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("idle", 60000)
        _, pid2, epoch2 = await c.init_producer_id("busy", 60000)
        await c.add_partitions("busy", pid2, epoch2, {A0})
        clock.now += 10_001
        assert await c.expire_transactional_ids() == 1  # an open transaction never expires
        assert "idle" not in c.txns and "busy" in c.txns
        assert log.states("idle")[-1] is None  # a tombstone
        assert await c.add_partitions("idle", pid, epoch, {A0}) == \
            ErrorCode.invalid_producer_id_mapping

    run(go())


def test_a_new_leader_replays_the_log_and_finishes_prepared_transactions() -> None:
    async def go() -> None:
        c, log, markers, _ = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("open", 60000)
        await c.add_partitions("open", pid, epoch, {A0})
        _, pid2, epoch2 = await c.init_producer_id("prepared", 60000)
        await c.add_partitions("prepared", pid2, epoch2, {A1, B0})
        markers.failing = {A1: ErrorCode.kafka_storage_error}  # the commit cannot finish
        assert await c.end_txn("prepared", pid2, epoch2, commit=True) == ErrorCode.none
        assert c.txns["prepared"].state == TxnState.PREPARE_COMMIT
        c.stop()
        c.on_resigned(range(4))

        # the next coordinator reads the same log
        fresh, _, fresh_markers, _ = make(log=log)
        await loaded(fresh)
        assert fresh.txns["open"].state == TxnState.ONGOING
        assert fresh.txns["open"].partitions == {A0}
        for _ in range(100):
            if fresh.txns["prepared"].state == TxnState.COMPLETE_COMMIT:
                break
            await asyncio.sleep(0.01)
        assert fresh.txns["prepared"].state == TxnState.COMPLETE_COMMIT
        assert sorted(m[4] for m in fresh_markers.written) == [A1, B0]
        fresh.stop()

    run(go())


def test_markers_are_retried_until_the_partition_takes_them() -> None:
    async def go() -> None:
        c, _, markers, _ = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 60000)
        await c.add_partitions("t", pid, epoch, {A0, A1})
        markers.failing = {A1: ErrorCode.not_leader_or_follower}
        assert await c.end_txn("t", pid, epoch, commit=False) == ErrorCode.none
        assert c.txns["t"].state == TxnState.PREPARE_ABORT
        assert (await c.init_producer_id("t", 60000))[0] == ErrorCode.concurrent_transactions
        markers.failing = {}
        for _ in range(100):
            if c.txns["t"].state == TxnState.COMPLETE_ABORT:
                break
            await asyncio.sleep(0.01)
        assert c.txns["t"].state == TxnState.COMPLETE_ABORT
        assert [m[4] for m in markers.written] == [A0, A1]
        c.stop()

    run(go())


def test_a_deleted_partition_does_not_wedge_the_transaction() -> None:
    async def go() -> None:
        c, _, markers, _ = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 60000)
        await c.add_partitions("t", pid, epoch, {A0, B0})
        markers.failing = {B0: ErrorCode.unknown_topic_or_partition}
        assert await c.end_txn("t", pid, epoch, commit=True) == ErrorCode.none
        assert c.txns["t"].state == TxnState.COMPLETE_COMMIT

    run(go())


@pytest.mark.parametrize("code,expected", [
    (ErrorCode.not_leader_or_follower, ErrorCode.not_coordinator),
    (ErrorCode.request_timed_out, ErrorCode.coordinator_not_available),
])
def test_a_failed_log_write_changes_nothing(code: ErrorCode, expected: ErrorCode) -> None:
    async def go() -> None:
        c, log, _, _ = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("t", 60000)
        await c.add_partitions("t", pid, epoch, {A0})
        log.fail_with = code
        assert await c.end_txn("t", pid, epoch, commit=True) == expected
        assert c.txns["t"].state == TxnState.ONGOING and c.txns["t"].pending is None
        assert (await c.init_producer_id("t", 60000))[0] == expected  # a fence fails too
        assert c.txns["t"].pending is None
        log.fail_with = None
        # the failed fence bumped the epoch once; the retry does not bump it again
        assert await c.init_producer_id("t", 60000) == (ErrorCode.none, pid, epoch + 2)

    run(go())


def test_list_and_describe() -> None:
    async def go() -> None:
        c, _, _, clock = make()
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("a", 60000)
        await c.add_partitions("a", pid, epoch, {A0})
        _, pid_b, _ = await c.init_producer_id("b", 60000)
        code, unknown, found = c.list_transactions()
        assert code == ErrorCode.none and [m.transactional_id for m in found] == ["a", "b"]
        _, unknown, found = c.list_transactions(states=["Ongoing", "Bogus"])
        assert unknown == ["Bogus"] and [m.transactional_id for m in found] == ["a"]
        assert [m.transactional_id for m in c.list_transactions(producer_ids=[pid_b])[2]] == ["b"]
        clock.now += 1000
        assert [m.transactional_id for m in c.list_transactions(min_duration_ms=1000)[2]] == ["a"]
        assert c.list_transactions(min_duration_ms=1001)[2] == []
        assert [m.transactional_id for m in c.list_transactions(pattern="b.*")[2]] == ["b"]
        code, md = c.describe("a")
        assert code == ErrorCode.none and md is not None
        assert (md.state.kafka_name, md.partitions, md.timeout_ms) == ("Ongoing", {A0}, 60000)

    run(go())
