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

import struct
import time
from dataclasses import dataclass
from typing import Any

import typer

from odradek.cli.common import BootstrapOption, client_config, fail, reported

app = typer.Typer(no_args_is_help=True,
                  help="List, describe and abort transactions (kafka-transactions.sh).")

TIMEOUT_S = 30
FIND_COORDINATOR, WRITE_TXN_MARKERS = 10, 27
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
DEFAULT_MAX_TIMEOUT_MIN = 15  # transaction.max.timeout.ms's default, in minutes


# ---------------------------------------------------------------------------- the wire


def call(address: tuple[str, int], api_key: int, version: int, **fields: Any) -> Any:
    """Send one request built from keyword fields; the decoded response."""
    from odradek.cli.raw_call import call as raw_call
    from odradek.protocol.messages import request_class

    body = request_class(api_key, version)(**fields)
    return raw_call(address, api_key, version, body, "odradek-transactions")


def call_raw(address: tuple[str, int], api_key: int, version: int, **fields: Any) -> bytes:
    """The response frame (correlation id onwards) of one request."""
    from odradek.cli import raw_call
    from odradek.protocol.messages import request_class

    body = request_class(api_key, version)(**fields)
    return raw_call.call_raw(address, api_key, version, body, "odradek-transactions")[1]


@dataclass(frozen=True)
class TxnDescription:
    error_code: int
    transactional_id: str
    transaction_state: str
    timeout_ms: int
    start_ms: int  # -1: no transaction open
    producer_id: int
    producer_epoch: int
    partitions: tuple[tuple[str, int], ...]


class _Reader:
    """Flexible-version fields, for the one response kio cannot read (below)."""

    def __init__(self, data: bytes, pos: int) -> None:
        self.data, self.pos = data, pos

    def fixed(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def string(self) -> str:
        n = self.uvarint() - 1
        text = self.data[self.pos : self.pos + max(n, 0)].decode()
        self.pos += max(n, 0)
        return text

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


def describe_transactions(address: tuple[str, int],
                          transactional_ids: tuple[str, ...]) -> list[TxnDescription]:
    """DescribeTransactions v0, read by hand: its start time is -1 when no transaction
    is open, as Kafka sends it, and kio's reader refuses negative timestamps."""
    from odradek.protocol.client_framing import response_body_offset

    frame = call_raw(address, DESCRIBE_TRANSACTIONS, 0, transactional_ids=transactional_ids)
    r = _Reader(frame, response_body_offset(DESCRIBE_TRANSACTIONS, 0, frame))
    r.fixed(">i")  # throttle time
    out = []
    for _ in range(r.uvarint() - 1):
        code, tid, state = r.fixed(">h"), r.string(), r.string()
        timeout, start, pid, epoch = r.fixed(">i"), r.fixed(">q"), r.fixed(">q"), r.fixed(">h")
        partitions = []
        for _ in range(r.uvarint() - 1):
            topic = r.string()
            partitions += [(topic, r.fixed(">i")) for _ in range(r.uvarint() - 1)]
            r.skip_tags()
        r.skip_tags()
        out.append(TxnDescription(code, tid, state, timeout, start, pid, epoch,
                                  tuple(partitions)))
    return out


def schema(api_key: int, version: int) -> Any:
    """The module of a request's kio classes (for its nested types)."""
    import sys

    from odradek.protocol.messages import request_class

    return sys.modules[request_class(api_key, version).__module__]


def _error_name(code: Any) -> str:
    from odradek.protocol.errors import ErrorCode

    return ErrorCode(int(code)).name.upper()


class Cluster:
    """The brokers and partition leaders, from confluent-kafka's metadata."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka.admin import AdminClient

        self.client = AdminClient(client_config(bootstrap))  # kept: futures need it
        self.metadata = self.client.list_topics(timeout=TIMEOUT_S)

    def brokers(self) -> dict[int, tuple[str, int]]:
        return {b.id: (str(b.host), int(b.port)) for b in self.metadata.brokers.values()}

    def partitions(self, topic: str) -> list[int]:
        md = self.metadata.topics.get(topic)
        if md is None or md.error is not None:
            fail(f"topic {topic}: {md.error.str() if md is not None and md.error else 'not found'}")
        return sorted(md.partitions)

    def leader(self, topic: str, partition: int) -> tuple[str, int]:
        md = self.metadata.topics.get(topic)
        if md is None or partition not in md.partitions:
            fail(f"{topic}-{partition} does not exist")
        leader = md.partitions[partition].leader
        if leader not in self.brokers():
            fail(f"{topic}-{partition} has no leader")
        return self.brokers()[leader]

    def coordinator(self, transactional_id: str) -> tuple[int, tuple[str, int]]:
        first = next(iter(self.brokers().values()))
        found = call(first, FIND_COORDINATOR, 3, key=transactional_id, key_type=1)
        if found.error_code:
            fail(f"FindCoordinator for {transactional_id}: {_error_name(found.error_code)}")
        return found.node_id, (found.host, found.port)


def _table(columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    """Aligned columns, never cut to the terminal: scripts read this."""
    cells = [list(columns)] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    for r in cells:
        print("\t".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


# ---------------------------------------------------------------------------- queries


def list_all(cluster: Cluster, states: list[str] | None = None,
             producer_ids: list[int] | None = None) -> list[tuple[str, int, int, str]]:
    """(transactional id, coordinator id, producer id, state) from every broker."""
    rows = []
    for node, address in sorted(cluster.brokers().items()):
        response = call(address, LIST_TRANSACTIONS, 0, state_filters=tuple(states or ()),
                        producer_id_filters=tuple(producer_ids or ()))
        if response.error_code:
            fail(f"ListTransactions on broker {node}: {_error_name(response.error_code)}")
        rows += [(t.transactional_id, node, t.producer_id, t.transaction_state)
                 for t in response.transaction_states]
    return sorted(rows)


def describe_one(cluster: Cluster, transactional_id: str) -> tuple[int, TxnDescription]:
    node, address = cluster.coordinator(transactional_id)
    state = describe_transactions(address, (transactional_id,))[0]
    if state.error_code:
        fail(f"{transactional_id}: {_error_name(state.error_code)}")
    return node, state


def producers_of(cluster: Cluster, topic: str, partition: int) -> list[Any]:
    s = schema(DESCRIBE_PRODUCERS, 0)
    response = call(cluster.leader(topic, partition), DESCRIBE_PRODUCERS, 0,
                    topics=(s.TopicRequest(name=topic, partition_indexes=(partition,)),))
    result = response.topics[0].partitions[0]
    if result.error_code:
        fail(f"{topic}-{partition}: {_error_name(result.error_code)}")
    return list(result.active_producers)


# ---------------------------------------------------------------------------- commands


@app.command("list")
def list_transactions(bootstrap: str = BootstrapOption) -> None:
    """List every transactional id the coordinators know."""
    with reported():
        rows = list_all(Cluster(bootstrap))
        _table(("TransactionalId", "Coordinator", "ProducerId", "TransactionState"), rows)


@app.command()
def describe(
    transactional_id: str = typer.Option(..., "--transactional-id", help="The id"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Describe one transactional id and its open transaction."""
    with reported():
        node, state = describe_one(Cluster(bootstrap), transactional_id)
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
        producers = producers_of(Cluster(bootstrap), topic, partition)
        _table(("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                "LastTimestamp", "CurrentTransactionStartOffset"),
               [(p.producer_id, p.producer_epoch, p.coordinator_epoch, p.last_sequence,
                 p.last_timestamp, p.current_txn_start_offset if p.current_txn_start_offset >= 0
                 else None) for p in producers])


def find_hanging_rows(cluster: Cluster, topic: str | None, partition: int | None,
                      max_timeout_min: int) -> list[tuple[Any, ...]]:
    """Open transactions older than the longest allowed timeout that no coordinator
    has ongoing with that partition (Kafka's FindHangingTransactions)."""
    now = int(time.time() * 1000)
    topics = [topic] if topic else sorted(t for t in cluster.metadata.topics
                                          if not t.startswith("__"))
    candidates = []
    for t in topics:
        for p in [partition] if partition is not None else cluster.partitions(t):
            for prod in producers_of(cluster, t, p):
                start = prod.current_txn_start_offset
                if start >= 0 and now - prod.last_timestamp > max_timeout_min * 60_000:
                    candidates.append((t, p, prod))
    if not candidates:
        return []
    ongoing: set[tuple[int, str, int]] = set()
    pids = sorted({c[2].producer_id for c in candidates})
    for tid, _node, _pid, _state in list_all(cluster, ["Ongoing"], pids):
        _, state = describe_one(cluster, tid)
        ongoing |= {(state.producer_id, t, p) for t, p in state.partitions}
    return [(t, p, prod.producer_id, prod.producer_epoch, prod.coordinator_epoch,
             prod.current_txn_start_offset, prod.last_timestamp,
             (now - prod.last_timestamp) // 60_000)
            for t, p, prod in candidates if (prod.producer_id, t, p) not in ongoing]


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
        rows = find_hanging_rows(Cluster(bootstrap), topic, partition, max_transaction_timeout)
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
        cluster = Cluster(bootstrap)
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
                 f"{_error_name(code)}")
        print(f"Aborted the transaction of producer {producer_id} (epoch {producer_epoch}) "
              f"in {topic}-{partition}")
