"""Transaction version 2 in the coordinator's state machine (in-memory log and
markers): the epoch bump per EndTxn, the markers' epoch, the retry table, the move to
the next producer id when the epochs run out, and a reload of what was written."""

from __future__ import annotations

from odradek.coordinator.txn import TxnState
from odradek.coordinator.txn.metadata import MAX_EPOCH
from odradek.protocol.errors import ErrorCode
from tests.transactions.test_coordinator import A0, B0, loaded, make, run

TV2 = 2


def test_each_end_bumps_the_epoch_and_the_markers_carry_it() -> None:
    async def go() -> None:
        c, log, markers, _ = make()
        await loaded(c)
        _, pid, e = await c.init_producer_id("t", 60000)
        assert await c.add_partitions("t", pid, e, {A0, B0}, TV2) == ErrorCode.none
        assert await c.end_transaction("t", pid, e, True, TV2) == (ErrorCode.none, pid, e + 1)
        assert {(m[1], m[3], m[4]) for m in markers.written} == {(e + 1, True, A0),
                                                                 (e + 1, True, B0)}
        # the retry of a lost answer, then the wrong outcome for it, then a zombie
        assert await c.end_transaction("t", pid, e, True, TV2) == (ErrorCode.none, pid, e + 1)
        assert (await c.end_transaction("t", pid, e, False, TV2))[0] == \
            ErrorCode.invalid_txn_state
        assert (await c.add_partitions("t", pid, e, {A0}, TV2)) == ErrorCode.producer_fenced
        # an abort with nothing in the transaction is still an end, with a bump
        assert await c.end_transaction("t", pid, e + 1, False, TV2) == \
            (ErrorCode.none, pid, e + 2)
        md = c.txns["t"]
        assert (md.state, md.producer_epoch, md.last_producer_epoch) == (
            TxnState.COMPLETE_ABORT, e + 2, e + 1)
        # written as version 1 (flexible) records with the client's version, as Kafka
        last = log.states("t")[-1]
        assert last is not None and last.client_transaction_version == TV2
    run(go())


def test_the_last_epoch_moves_the_producer_to_a_new_id() -> None:
    async def go() -> None:
        c, log, markers, _ = make()
        await loaded(c)
        _, pid, _ = await c.init_producer_id("t", 60000)
        md = c.txns["t"]
        md.producer_epoch = MAX_EPOCH - 1  # as after 32,766 transactions
        assert await c.add_partitions("t", pid, MAX_EPOCH - 1, {A0}, TV2) == ErrorCode.none
        code, new_pid, epoch = await c.end_transaction("t", pid, MAX_EPOCH - 1, True, TV2)
        assert (code, epoch) == (ErrorCode.none, 0) and new_pid != pid
        assert markers.written[-1][:2] == (pid, MAX_EPOCH)  # the old id's last epoch
        assert (md.producer_id, md.producer_epoch, md.last_producer_id) == (new_pid, 0, pid)
        # the retry with the old id and its last client epoch is answered the same
        assert await c.end_transaction("t", pid, MAX_EPOCH - 1, True, TV2) == \
            (ErrorCode.none, new_pid, 0)
        assert await c.add_partitions("t", new_pid, 0, {A0}, TV2) == ErrorCode.none
        # a coordinator that reloads the partition knows the new id
        c2, _, _, _ = make(log=log)
        await loaded(c2)
        assert (c2.txns["t"].producer_id, c2.txns["t"].state) == (new_pid, TxnState.ONGOING)
    run(go())


def test_version_1_ends_keep_the_epoch() -> None:
    async def go() -> None:
        c, _, markers, _ = make()
        await loaded(c)
        _, pid, e = await c.init_producer_id("t", 60000)
        assert await c.add_partitions("t", pid, e, {A0}) == ErrorCode.none
        assert await c.end_txn("t", pid, e, commit=True) == ErrorCode.none
        assert markers.written[-1][1] == e and c.txns["t"].producer_epoch == e
        assert await c.end_txn("t", pid, e, commit=False) == ErrorCode.invalid_txn_state
    run(go())
