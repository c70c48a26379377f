"""Idempotence and transactions across broker restarts: SIGKILL and clean stops.

What must come back: the producers' sequences (a retry after the restart is still a
duplicate), open transactions (the LSO still holds read_committed consumers at them),
the coordinator's state (`__transaction_state`), and which records were aborted.
"""

from __future__ import annotations

import datetime

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import NewRecord, encode_batch
from tests.conftest import BrokerProcess
from tests.transactions.helpers import (
    READ_UNCOMMITTED,
    create_topic,
    end_offsets,
    produce_in_txn,
    read_all,
    txn_producer,
    unique,
    values,
    wait_for,
)
from tests.transactions.test_protocol import INIT_PID, produce
from tests.wire import WireClient


def _stop(broker: BrokerProcess, how: str) -> None:
    if how == "kill":
        broker.kill()
    else:
        broker.stop()
    broker.start()


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_transactions_survive_a_restart(fresh_txn_broker: BrokerProcess, how: str) -> None:
    broker = fresh_txn_broker.start()
    bootstrap = broker.bootstrap
    topic = create_topic(bootstrap, unique("restart"))
    tid = unique("tx")
    p = txn_producer(bootstrap, tid)
    produce_in_txn(p, topic, ["c1"])
    produce_in_txn(p, topic, ["a1", "a2"], commit=False)
    p.begin_transaction()
    p.produce(topic, b"open", partition=0)
    assert p.flush(10) == 0
    assert end_offsets(bootstrap, topic) == (5, 6)

    _stop(broker, how)
    # the open transaction still holds read_committed back; the abort is still known
    assert end_offsets(bootstrap, topic) == (5, 6)
    assert values(read_all(bootstrap, topic)) == ["c1"]
    assert values(read_all(bootstrap, topic, isolation=READ_UNCOMMITTED)) == [
        "c1", "a1", "a2", "open"]
    # the restarted coordinator knows the transaction: a new instance fences it
    newer = txn_producer(bootstrap, tid)
    assert end_offsets(bootstrap, topic) == (7, 7)
    produce_in_txn(newer, topic, ["c2"])
    assert values(read_all(bootstrap, topic)) == ["c1", "c2"]


def test_a_transaction_open_at_a_crash_still_times_out(fresh_txn_broker: BrokerProcess) -> None:
    broker = fresh_txn_broker.start()
    bootstrap = broker.bootstrap
    topic = create_topic(bootstrap, unique("crash-timeout"))
    p = txn_producer(bootstrap, unique("tx"), **{"transaction.timeout.ms": 3000})
    p.begin_transaction()
    p.produce(topic, b"orphan", partition=0)
    assert p.flush(10) == 0
    broker.kill()
    broker.start()
    took = wait_for(lambda: end_offsets(bootstrap, topic) == (2, 2), 15,
                    "the restarted coordinator aborting the timed-out transaction")
    print(f"\nreleased {took:.2f}s after the restart")
    assert values(read_all(bootstrap, topic)) == []


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_an_idempotent_retry_after_a_restart_is_not_written_twice(
        fresh_txn_broker: BrokerProcess, how: str) -> None:
    broker = fresh_txn_broker.start()
    topic = create_topic(broker.bootstrap, unique("dedupe"))
    with WireClient(broker.bootstrap) as c:
        pid = c.call(INIT_PID, 4, transactional_id=None,
                     transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1,
                     producer_epoch=-1).producer_id
        batches = [encode_batch([NewRecord(value=f"v{i}".encode())], producer_id=pid,
                                producer_epoch=0, base_sequence=i) for i in range(3)]
        for i, b in enumerate(batches):
            assert produce(c, topic, b, None) == (ErrorCode.none, i)
    _stop(broker, how)
    with WireClient(broker.bootstrap) as c:
        # the last batch again, as a producer retrying across the broker's restart
        # (a snapshot keeps each producer's last batch only, as Kafka's does: that one
        # is recognised whatever the restart; older retries only after a crash, whose
        # recovery replays the batches after the last snapshot)
        assert produce(c, topic, batches[2], None) == (ErrorCode.none, 2)
        nxt = encode_batch([NewRecord(value=b"v3")], producer_id=pid, producer_epoch=0,
                           base_sequence=3)
        assert produce(c, topic, nxt, None) == (ErrorCode.none, 3)
        gap = encode_batch([NewRecord(value=b"v9")], producer_id=pid, producer_epoch=0,
                           base_sequence=9)
        assert produce(c, topic, gap, None)[0] == ErrorCode.out_of_order_sequence_number
    assert values(read_all(broker.bootstrap, topic, isolation=READ_UNCOMMITTED)) == [
        "v0", "v1", "v2", "v3"]
