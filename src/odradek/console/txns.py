"""The transactions page: ongoing transactions, hanging ones, and aborting a hanging one —
the requests `odradek transactions` sends (no binding has them), reused as they are."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from odradek.client import ClientError
from odradek.client import transactions as tx
from odradek.client.raw import error_name, schema
from odradek.console.admin import ConsoleError

SECURED = ("the transactions APIs have no binding in confluent-kafka and are sent on plain "
           "connections: this page needs the cluster's PLAINTEXT listener")


@dataclass(frozen=True)
class Ongoing:
    transactional_id: str
    coordinator: int
    producer_id: int
    producer_epoch: int
    state: str
    age_s: float | None
    timeout_ms: int
    partitions: str


@dataclass(frozen=True)
class Hanging:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    start_offset: int
    minutes: int


def _cluster(config: dict[str, Any]) -> Any:
    try:
        return tx.Cluster(config)
    except Exception as e:  # confluent-kafka's KafkaException
        raise ConsoleError(f"cannot reach the cluster: {e}") from None


def ongoing(config: dict[str, Any]) -> list[Ongoing]:
    """Every transactional id the coordinators know, described."""
    try:
        cluster = _cluster(config)
        now = time.time() * 1000
        out = []
        for tid, node, _pid, state in tx.list_all(cluster):
            _, d = tx.describe_one(cluster, tid)
            out.append(Ongoing(
                tid, node, d.producer_id, d.producer_epoch, state,
                (now - d.start_ms) / 1000 if d.start_ms >= 0 else None, d.timeout_ms,
                ", ".join(f"{t}-{p}" for t, p in d.partitions) or "-"))
    except ClientError as e:
        raise ConsoleError(str(e)) from None
    except OSError as e:
        raise ConsoleError(f"a broker did not answer: {e}") from None
    return out


def hanging(config: dict[str, Any], max_timeout_min: int) -> list[Hanging]:
    """Asks every partition's leader for its producers: one request per partition."""
    try:
        rows = tx.find_hanging_rows(_cluster(config), None, None, max_timeout_min)
    except ClientError as e:
        raise ConsoleError(str(e)) from None
    except OSError as e:
        raise ConsoleError(f"a broker did not answer: {e}") from None
    return [Hanging(t, p, pid, epoch, start, minutes)
            for t, p, pid, epoch, _ce, start, _ts, minutes in rows]


class HangingScan:
    """The hanging-transaction scan in the background: it asks every partition's leader
    (seconds on a thousand partitions), so the page shows the last scan and its time."""

    RESCAN_S = 300.0

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config  # the console's client config
        self.rows: list[Hanging] = []
        self.checked_at = 0.0
        self.max_timeout_min = 15
        self.error: str | None = None
        self._lock = threading.Lock()
        self._running = False

    @property
    def running(self) -> bool:
        return self._running

    def request(self, max_timeout_min: int, force: bool = False) -> None:
        """Start a scan unless one runs, or the last one is recent and for the same bound."""
        with self._lock:
            fresh = time.time() - self.checked_at < self.RESCAN_S and \
                max_timeout_min == self.max_timeout_min
            if self._running or (fresh and not force):
                return
            self._running = True
        threading.Thread(target=self._scan, args=(max_timeout_min,), daemon=True,
                         name="console-hanging-scan").start()

    def _scan(self, max_timeout_min: int) -> None:
        try:
            self.rows, self.error = hanging(self.config, max_timeout_min), None
        except ConsoleError as e:
            self.error = str(e)
        finally:
            self.max_timeout_min = max_timeout_min
            self.checked_at = time.time()
            self._running = False


def abort(config: dict[str, Any], topic: str, partition: int, start_offset: int) -> int:
    """Write an ABORT marker for the transaction open at `start_offset`; its producer id."""
    try:
        cluster = _cluster(config)
        found = [p for p in tx.producers_of(cluster, topic, partition)
                 if p.current_txn_start_offset == start_offset]
        if not found:
            raise ConsoleError(f"no open transaction starts at offset {start_offset} of "
                               f"{topic}-{partition} (already ended?)")
        prod = found[0]
        s = schema(tx.WRITE_TXN_MARKERS, 1)
        marker = s.WritableTxnMarker(
            producer_id=prod.producer_id, producer_epoch=prod.producer_epoch,
            transaction_result=False, coordinator_epoch=max(prod.coordinator_epoch, 0),
            topics=(s.WritableTxnMarkerTopic(name=topic, partition_indexes=(partition,)),))
        response = tx.call(cluster.leader(topic, partition), tx.WRITE_TXN_MARKERS, 1,
                           markers=(marker,))
    except ClientError as e:
        raise ConsoleError(str(e)) from None
    except OSError as e:
        raise ConsoleError(f"the leader of {topic}-{partition} did not answer: {e}") from None
    code = response.markers[0].topics[0].partitions[0].error_code
    if code:
        raise ConsoleError(f"aborting producer {prod.producer_id}'s transaction in "
                           f"{topic}-{partition}: {error_name(code)}")
    return int(prod.producer_id)
