"""`odradek transactions`: the operations of Kafka's kafka-transactions.sh.

    list                 every transactional id the coordinators know, with its state
    describe             one transactional id: producer id and epoch, state, timeout,
                         start time, the partitions of its open transaction
    describe-producers   the producers a partition remembers, and where their open
                         transactions began
    find-hanging         transactions open in a partition longer than the longest
                         allowed timeout that no coordinator is finishing
    abort                end a hanging transaction in a partition (an ABORT marker)

confluent-kafka has no binding for ListTransactions, DescribeTransactions,
DescribeProducers or WriteTxnMarkers, so those are sent as the raw requests they are
(kio's messages), to the coordinators and partition leaders the metadata names.
Columns are Kafka's, so scripts written for kafka-transactions.sh read them.
"""

from __future__ import annotations

import time
from typing import Any

import typer

from odradek.cli.common import BootstrapOption, client_config, fail, reported
from odradek.client.raw import error_name, schema
from odradek.client.transactions import (
    DEFAULT_MAX_TIMEOUT_MIN,
    WRITE_TXN_MARKERS,
    Cluster,
    call,
    describe_one,
    find_hanging_rows,
    list_all,
    producers_of,
)

app = typer.Typer(no_args_is_help=True,
                  help="List, describe and abort transactions (kafka-transactions.sh).")



def _table(columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    """Aligned columns, never cut to the terminal: scripts read this."""
    cells = [list(columns)] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    for r in cells:
        print("\t".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


# ---------------------------------------------------------------------------- commands


@app.command("list")
def list_transactions(bootstrap: str = BootstrapOption) -> None:
    """List every transactional id the coordinators know."""
    with reported():
        rows = list_all(Cluster(client_config(bootstrap)))
        _table(("TransactionalId", "Coordinator", "ProducerId", "TransactionState"), rows)


@app.command()
def describe(
    transactional_id: str = typer.Option(..., "--transactional-id", help="The id"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Describe one transactional id and its open transaction."""
    with reported():
        node, state = describe_one(Cluster(client_config(bootstrap)), transactional_id)
        start = state.start_ms
        duration = int(time.time() * 1000) - start if start >= 0 else None
        partitions = ",".join(f"{t}-{p}" for t, p in state.partitions)
        _table(("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                "TransactionDurationMs", "TopicPartitions"),
               [(node, state.transactional_id, state.producer_id, state.producer_epoch,
                 state.transaction_state, state.timeout_ms,
                 start if start >= 0 else None, duration, partitions or None)])


@app.command("describe-producers")
def describe_producers(
    topic: str = typer.Option(..., "--topic"),
    partition: int = typer.Option(..., "--partition"),
    bootstrap: str = BootstrapOption,
) -> None:
    """The producers a partition's leader remembers."""
    with reported():
        producers = producers_of(Cluster(client_config(bootstrap)), topic, partition)
        _table(("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                "LastTimestamp", "CurrentTransactionStartOffset"),
               [(p.producer_id, p.producer_epoch, p.coordinator_epoch, p.last_sequence,
                 p.last_timestamp, p.current_txn_start_offset if p.current_txn_start_offset >= 0
                 else None) for p in producers])


@app.command("find-hanging")
def find_hanging(
    topic: str | None = typer.Option(None, "--topic", help="Default: every topic"),
    partition: int | None = typer.Option(None, "--partition"),
    max_transaction_timeout: int = typer.Option(
        DEFAULT_MAX_TIMEOUT_MIN, "--max-transaction-timeout",
        help="Minutes: the brokers' transaction.max.timeout.ms"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Find transactions that hold back read_committed consumers and that no
    coordinator will end."""
    with reported():
        rows = find_hanging_rows(Cluster(client_config(bootstrap)), topic, partition,
                                 max_transaction_timeout)
        _table(("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                "StartOffset", "LastTimestamp", "Duration(min)"), rows)


@app.command()
def abort(
    topic: str = typer.Option(..., "--topic"),
    partition: int = typer.Option(..., "--partition"),
    start_offset: int | None = typer.Option(
        None, "--start-offset", help="Where the hanging transaction began (find-hanging)"),
    producer_id: int | None = typer.Option(None, "--producer-id"),
    producer_epoch: int | None = typer.Option(None, "--producer-epoch"),
    coordinator_epoch: int | None = typer.Option(None, "--coordinator-epoch"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Abort a hanging transaction in one partition: by its start offset, or by
    producer id, epoch and coordinator epoch."""
    with reported():
        cluster = Cluster(client_config(bootstrap))
        if start_offset is not None:
            found = [p for p in producers_of(cluster, topic, partition)
                     if p.current_txn_start_offset == start_offset]
            if not found:
                fail(f"no open transaction starts at offset {start_offset} of "
                     f"{topic}-{partition}")
            producer_id, producer_epoch = found[0].producer_id, found[0].producer_epoch
            coordinator_epoch = max(found[0].coordinator_epoch, 0)
        if producer_id is None or producer_epoch is None or coordinator_epoch is None:
            fail("give --start-offset, or --producer-id, --producer-epoch and "
                 "--coordinator-epoch")
        s = schema(WRITE_TXN_MARKERS, 1)
        marker = s.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
            coordinator_epoch=coordinator_epoch,
            topics=(s.WritableTxnMarkerTopic(name=topic, partition_indexes=(partition,)),))
        response = call(cluster.leader(topic, partition), WRITE_TXN_MARKERS, 1,
                        markers=(marker,))
        code = response.markers[0].topics[0].partitions[0].error_code
        if code:
            fail(f"aborting the transaction of producer {producer_id} in {topic}-{partition}: "
                 f"{error_name(code)}")
        print(f"Aborted the transaction of producer {producer_id} (epoch {producer_epoch}) "
              f"in {topic}-{partition}")
