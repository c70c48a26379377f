"""The transactions APIs no binding has (ListTransactions, DescribeTransactions,
DescribeProducers, WriteTxnMarkers), asked as kafka-transactions.sh asks them: the
queries behind `odradek transactions` and the console's transactions page."""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import Any

from odradek.client import ClientError, raw
from odradek.client.raw import error_name, schema

TIMEOUT_S = 30
FIND_COORDINATOR, WRITE_TXN_MARKERS = 10, 27
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
DEFAULT_MAX_TIMEOUT_MIN = 15  # transaction.max.timeout.ms's default, in minutes


CLIENT_ID = "odradek-transactions"


def call(address: tuple[str, int], api_key: int, version: int, **fields: Any) -> Any:
    """Send one request built from keyword fields; the decoded response."""
    return raw.request(address, api_key, version, CLIENT_ID, **fields)


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

    frame = raw.request_frame(address, DESCRIBE_TRANSACTIONS, 0, CLIENT_ID,
                              transactional_ids=transactional_ids)
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


class Cluster:
    """The brokers and partition leaders, from confluent-kafka's metadata."""

    def __init__(self, config: dict[str, Any]) -> None:
        """`config`: a confluent-kafka client config (bootstrap.servers, security)."""
        from confluent_kafka.admin import AdminClient

        self.client = AdminClient(config)  # kept: futures need it
        self.metadata = self.client.list_topics(timeout=TIMEOUT_S)

    def brokers(self) -> dict[int, tuple[str, int]]:
        return {b.id: (str(b.host), int(b.port)) for b in self.metadata.brokers.values()}

    def partitions(self, topic: str) -> list[int]:
        md = self.metadata.topics.get(topic)
        if md is None or md.error is not None:
            why = md.error.str() if md is not None and md.error else "not found"
            raise ClientError(f"topic {topic}: {why}")
        return sorted(md.partitions)

    def leader(self, topic: str, partition: int) -> tuple[str, int]:
        md = self.metadata.topics.get(topic)
        if md is None or partition not in md.partitions:
            raise ClientError(f"{topic}-{partition} does not exist")
        leader = md.partitions[partition].leader
        if leader not in self.brokers():
            raise ClientError(f"{topic}-{partition} has no leader")
        return self.brokers()[leader]

    def coordinator(self, transactional_id: str) -> tuple[int, tuple[str, int]]:
        first = next(iter(self.brokers().values()))
        found = call(first, FIND_COORDINATOR, 3, key=transactional_id, key_type=1)
        if found.error_code:
            raise ClientError(f"FindCoordinator for {transactional_id}: "
                              f"{error_name(found.error_code)}")
        return found.node_id, (found.host, found.port)


# ---------------------------------------------------------------------------- queries


def list_all(cluster: Cluster, states: list[str] | None = None,
             producer_ids: list[int] | None = None) -> list[tuple[str, int, int, str]]:
    """(transactional id, coordinator id, producer id, state) from every broker."""
    rows = []
    for node, address in sorted(cluster.brokers().items()):
        response = call(address, LIST_TRANSACTIONS, 0, state_filters=tuple(states or ()),
                        producer_id_filters=tuple(producer_ids or ()))
        if response.error_code:
            raise ClientError(f"ListTransactions on broker {node}: "
                              f"{error_name(response.error_code)}")
        rows += [(t.transactional_id, node, t.producer_id, t.transaction_state)
                 for t in response.transaction_states]
    return sorted(rows)


def describe_one(cluster: Cluster, transactional_id: str) -> tuple[int, TxnDescription]:
    node, address = cluster.coordinator(transactional_id)
    state = describe_transactions(address, (transactional_id,))[0]
    if state.error_code:
        raise ClientError(f"{transactional_id}: {error_name(state.error_code)}")
    return node, state


def producers_of(cluster: Cluster, topic: str, partition: int) -> list[Any]:
    s = schema(DESCRIBE_PRODUCERS, 0)
    response = call(cluster.leader(topic, partition), DESCRIBE_PRODUCERS, 0,
                    topics=(s.TopicRequest(name=topic, partition_indexes=(partition,)),))
    result = response.topics[0].partitions[0]
    if result.error_code:
        raise ClientError(f"{topic}-{partition}: {error_name(result.error_code)}")
    return list(result.active_producers)


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
