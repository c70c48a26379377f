"""Transactions as the cleaner sees them: which batches were aborted, which markers may go.

Kafka finds aborted transactions in each segment's `.txnindex`; this log writes no
transaction index yet, so `collect_aborted_transactions` derives the same list from the
batch headers (a producer's first transactional batch opens its transaction, its
ABORT marker closes it as aborted), decoding only the one record of each marker.
Only headers are read: the pass costs little next to the cleaning it serves.

`CleanedTransactionMetadata` is Kafka's class of that name, decision for decision:
- a data batch of an aborted transaction may be discarded (records and all);
- an ABORT marker stays while any batch of its transaction is still in the log;
- a COMMIT marker stays while any batch of its transaction is still in the log;
- a marker that may go is first given a delete horizon (`delete.retention.ms` from the
  cleaning that found it removable) and removed by a cleaning after that horizon, so a
  consumer that was reading the transaction still sees its end.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from odradek.protocol.batch import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    F_ATTRS,
    F_BASE_OFFSET,
    F_COUNT,
    F_LAST_DELTA,
    F_LENGTH,
    F_PID,
    LOG_OVERHEAD,
    HeaderFields,
)
from odradek.protocol.errors import CorruptMessage
from odradek.protocol.records import ControlType, Record, decode_batch, read_control_record
from odradek.storage.segment import (
    LogSegment,
)


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset


def control_type(segment: LogSegment, position: int, h: HeaderFields) -> ControlType | None:
    """The marker type of a control batch; None for an emptied one or an unknown type."""
    if h[F_COUNT] == 0:
        return None
    batch = decode_batch(segment.read_batch(position, h[F_LENGTH] + LOG_OVERHEAD),
                         verify_crc=False)
    return marker_of(batch.records[0].key, batch.records[0].value)


def marker_of(key: bytes | None, value: bytes | None) -> ControlType | None:
    try:
        marker, _ = read_control_record(Record(0, 0, key, value))
    except CorruptMessage:
        return None
    return marker


def collect_aborted_transactions(
    segments: Sequence[LogSegment], start: int, end: int
) -> list[AbortedTxn]:
    """Aborted transactions that end at or after `start` and begin before `end`,
    ordered by first offset (what Kafka's collectAbortedTransactions returns)."""
    open_txns: dict[int, int] = {}  # producer id → first offset
    aborted: list[AbortedTxn] = []
    for seg in segments:
        if seg.base_offset >= end:
            break
        for pos, h in seg.batches_from(0):
            if h[F_BASE_OFFSET] >= end:
                break
            pid = h[F_PID]
            attrs = h[F_ATTRS]
            if pid < 0 or not attrs & ATTR_TRANSACTIONAL:
                continue
            if attrs & ATTR_CONTROL:
                first = open_txns.pop(pid, None)
                if first is not None and control_type(seg, pos, h) is ControlType.ABORT:
                    last = h[F_BASE_OFFSET] + h[F_LAST_DELTA]
                    if last >= start:
                        aborted.append(AbortedTxn(pid, first, last))
            else:
                open_txns.setdefault(pid, h[F_BASE_OFFSET])
    aborted.sort(key=lambda t: t.first_offset)
    return aborted


class _AbortedState:
    __slots__ = ("last_observed_batch_offset", "txn")

    def __init__(self, txn: AbortedTxn) -> None:
        self.txn = txn
        self.last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    """Transaction state while the cleaner walks the log in offset order."""

    def __init__(self, aborted: Sequence[AbortedTxn] = ()) -> None:
        self._aborted = deque(sorted(aborted, key=lambda t: t.first_offset))
        self._ongoing_committed: set[int] = set()
        self._ongoing_aborted: dict[int, _AbortedState] = {}

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0].first_offset <= offset:
            txn = self._aborted.popleft()
            self._ongoing_aborted.setdefault(txn.producer_id, _AbortedState(txn))

    def on_control_batch_read(
        self, producer_id: int, last_offset: int, marker: ControlType | None, empty: bool
    ) -> bool:
        """True when the marker may be discarded (once its delete horizon passes)."""
        self._consume_aborted_up_to(last_offset)
        if empty:
            return True  # an already-cleaned marker
        if marker is ControlType.ABORT:
            state = self._ongoing_aborted.pop(producer_id, None)
            # Kept until every batch of the transaction has been removed.
            return state is None or state.last_observed_batch_offset is None
        if marker is ControlType.COMMIT:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False
            return True
        return False

    def on_batch_read(self, producer_id: int, last_offset: int, transactional: bool) -> bool:
        """True when the data batch belongs to an aborted transaction (may be discarded)."""
        self._consume_aborted_up_to(last_offset)
        if not transactional:
            return False
        state = self._ongoing_aborted.get(producer_id)
        if state is not None:
            state.last_observed_batch_offset = last_offset
            return True
        self._ongoing_committed.add(producer_id)
        return False
