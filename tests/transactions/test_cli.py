"""`odradek transactions` against a real broker: list, describe, describe-producers,
and finding and aborting a hanging transaction."""

from __future__ import annotations

import time

from typer.testing import CliRunner

from odradek.cli import transactions
from odradek.protocol.records import NewRecord, encode_batch
from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig
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
)

runner = CliRunner()


def cli(*args: str) -> list[list[str]]:
    out = runner.invoke(transactions.app, list(args), terminal_width=250)
    assert out.exit_code == 0, out.output
    return [line.split() for line in out.output.splitlines()]


def test_list_describe_and_describe_producers(txn_broker: BrokerProcess) -> None:
    b = txn_broker.bootstrap
    topic = create_topic(b, unique("cli"), partitions=2)
    tid = unique("cli-tx")
    p = txn_producer(b, tid)
    produce_in_txn(p, topic, ["done"])
    p.begin_transaction()
    p.produce(topic, b"open", partition=1)
    assert p.flush(10) == 0

    rows = cli("list", "-b", b)
    assert rows[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    mine = [r for r in rows if r[0] == tid]
    assert len(mine) == 1 and mine[0][1] == "1" and mine[0][3] == "Ongoing"
    pid = mine[0][2]

    header, row = cli("describe", "--transactional-id", tid, "-b", b)
    described = dict(zip(header, row, strict=True))
    assert described["ProducerId"] == pid and described["TransactionState"] == "Ongoing"
    assert described["TopicPartitions"] == f"{topic}-1"
    assert described["TransactionTimeoutMs"] == "60000"
    assert 0 <= int(described["TransactionDurationMs"]) < 60_000

    header, row = cli("describe-producers", "--topic", topic, "--partition", "1", "-b", b)
    producer = dict(zip(header, row, strict=True))
    assert producer["ProducerId"] == pid and producer["CurrentTransactionStartOffset"] == "0"
    header, row = cli("describe-producers", "--topic", topic, "--partition", "0", "-b", b)
    assert dict(zip(header, row, strict=True))["CurrentTransactionStartOffset"] == "-"
    p.commit_transaction(10)

    bad = runner.invoke(transactions.app, ["describe", "--transactional-id", "nope", "-b", b])
    assert bad.exit_code == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in bad.output


def test_find_and_abort_a_hanging_transaction(fresh_txn_broker: BrokerProcess) -> None:
    broker = fresh_txn_broker.start()
    b = broker.bootstrap
    topic = create_topic(b, unique("hang"))
    produce_in_txn(txn_producer(b, unique("tx")), topic, ["before"])
    # A transaction no coordinator knows of — left by a coordinator whose state was
    # lost — written into the partition while the broker is down.
    broker.stop()
    an_hour_ago = int(time.time() * 1000) - 3_600_000
    log = Log.open(broker.data_dir / f"{topic}-0", LogConfig(), clean_shutdown=True,
                   recovery_point=2)
    log.append_as_leader(bytearray(encode_batch(
        [NewRecord(value=b"stuck", timestamp=an_hour_ago)], producer_id=4242, producer_epoch=7,
        base_sequence=0, transactional=True)), 0)
    log.close()
    broker.start()
    assert end_offsets(b, topic) == (2, 3)  # every read_committed consumer is stuck at 2

    header, *rows = cli("find-hanging", "--topic", topic, "--max-transaction-timeout", "30",
                        "-b", b)
    assert header[0] == "Topic"
    assert len(rows) == 1
    hanging = dict(zip(header, rows[0], strict=True))
    assert (hanging["ProducerId"], hanging["ProducerEpoch"], hanging["StartOffset"]) == (
        "4242", "7", "2")
    # a transaction a coordinator is running is not hanging, however old
    p = txn_producer(b, unique("tx"))
    p.begin_transaction()
    p.produce(topic, b"live", partition=0)
    assert p.flush(10) == 0
    assert len(cli("find-hanging", "--topic", topic, "--max-transaction-timeout", "0",
                   "-b", b)) == 2

    out = runner.invoke(transactions.app, ["abort", "--topic", topic, "--partition", "0",
                                           "--start-offset", "2", "-b", b])
    assert out.exit_code == 0, out.output
    assert "Aborted the transaction of producer 4242" in out.output
    assert end_offsets(b, topic)[0] == 3  # now held only by the live transaction (at 3)
    p.commit_transaction(10)
    assert values(read_all(b, topic)) == ["before", "live"]
    assert "stuck" in values(read_all(b, topic, isolation=READ_UNCOMMITTED))
    assert len(cli("find-hanging", "--topic", topic, "--max-transaction-timeout", "0",
                   "-b", b)) == 1
