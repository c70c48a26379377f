"""Transactions in a partition's log: markers, the last stable offset, aborted ranges.

Functions over a `Log` and its private state, like log_changes.py: the log's own
methods, kept apart so log.py holds appends and reads. Kafka's semantics:
- a transaction is open in a partition from its producer's first transactional batch
  to the control batch (marker) the coordinator writes at commit or abort; producer
  state keeps each open transaction's first offset (`ProducerStateManager.ongoing`);
- the last stable offset (LSO) is the first offset of the oldest open transaction,
  capped by the high watermark: read_committed consumers read below it only;
- an ABORT marker that closes a transaction adds an entry to the `.txnindex` of the
  segment it lands in, so fetches can tell read_committed consumers which producers'
  records in the range to drop (`collect_aborted`);
- a marker's epoch becomes the producer's epoch in the partition: when a new producer
  fences an old one, the old one's later writes fail with INVALID_PRODUCER_EPOCH.
After a crash the loader rebuilds the indexes of the segments it recovered
(`rebuild_txn_indexes`), starting from the producer snapshot at or below them.
"""

from __future__ import annotations

import logging
import struct
from bisect import bisect_right
from collections.abc import Sequence
from typing import TYPE_CHECKING

from odradek.protocol.batch import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    BASE_OFFSET_OFFSET,
    F_ATTRS,
    F_BASE_OFFSET,
    F_LAST_DELTA,
    F_PID,
    HEADER_SIZE,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    BatchHeader,
    read_header,
)
from odradek.protocol.records import ControlType, decode_batch, encode_control_batch
from odradek.storage.cleaner_txn import control_type, marker_of
from odradek.storage.log_types import AppendInfo
from odradek.storage.producer_state import (
    AppendOrigin,
    CorruptSnapshot,
    ProducerStateManager,
    read_snapshot,
)
from odradek.storage.segment import (
    LogSegment,
)
from odradek.storage.txn_index import AbortedTxnEntry, write_index
from odradek.storage.validator import assign_offsets

if TYPE_CHECKING:
    from odradek.storage.log import Log

log = logging.getLogger(__name__)

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


# ------------------------------------------------------------------ markers


def append_marker(
    lg: Log,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    commit: bool,
    leader_epoch: int,
    origin: AppendOrigin = AppendOrigin.COORDINATOR,
) -> AppendInfo:
    """Write a COMMIT or ABORT marker for the producer at the log end.

    Raises InvalidProducerEpoch when the producer already wrote with a newer epoch (a
    marker from a coordinator that lost track), KafkaStorageError on I/O failure.
    """
    now = lg._clock()
    batch = bytearray(encode_control_batch(
        commit=commit, producer_id=producer_id, producer_epoch=producer_epoch,
        coordinator_epoch=coordinator_epoch, timestamp=now))
    header = read_header(batch)
    with lg._lock:
        lg._check_open()
        offset = lg._log_end_offset
        info = lg.producer_state.prepare_update(producer_id, origin)
        first = info.append_end_txn_marker(producer_epoch, offset, now, coordinator_epoch)
        assigned = assign_offsets(batch, [(0, header)], offset, leader_epoch, None)
        if leader_epoch >= 0:
            lg.leader_epochs.assign(leader_epoch, offset)
        lg._append(batch, assigned, now)
        lg.producer_state.update(info)
        if first is not None and not commit:
            _index_abort(lg, producer_id, first, offset)
        return lg._append_info(assigned)


def _index_abort(lg: Log, producer_id: int, first: int, marker_offset: int) -> None:
    """Record an aborted transaction in the active segment's `.txnindex`, with the LSO
    it left behind (the next open transaction's first offset, or past the marker)."""
    unstable = lg.producer_state.first_unstable_offset
    lso = marker_offset + 1 if unstable is None else unstable
    try:
        lg.txn_indexes.append(lg._segments[-1],
                              AbortedTxnEntry(producer_id, first, marker_offset, lso))
    except OSError as exc:
        raise lg._io_failed("transaction index append", exc) from exc


def replay_appended(lg: Log, buf: bytearray | memoryview,
                    batches: Sequence[tuple[int, BatchHeader]]) -> None:
    """Producer state for batches appended as they are (a follower's append), with the
    `.txnindex` entries of the aborts among them. Called with the log's lock held."""
    state = lg.producer_state
    for pos, h in batches:
        if h.producer_id < 0:
            continue
        if not h.is_control:
            state.replay_header(h)
            continue
        entry = state.last_entry(h.producer_id)
        first = None if entry is None else entry.current_txn_first_offset
        state.replay_header(h)
        if first is not None and h.records_count:
            record = decode_batch(memoryview(buf)[pos : pos + h.size], verify_crc=False).records[0]
            if marker_of(record.key, record.value) is ControlType.ABORT:
                _index_abort(lg, h.producer_id, first, h.base_offset)


# ------------------------------------------------------------------ reads


def last_stable_offset(lg: Log) -> int:
    """min(first offset of the oldest open transaction, high watermark), never below
    the log start (an open transaction may begin in a deleted segment)."""
    hw = lg.high_watermark
    unstable = lg.producer_state.first_unstable_offset
    if unstable is None or unstable >= hw:
        return hw
    return max(unstable, lg.log_start_offset)


def next_offset_after(records: bytes | bytearray | memoryview) -> int | None:
    """The offset following the last whole batch of fetched bytes (None if none)."""
    pos, end, found = 0, len(records), None
    while end - pos >= HEADER_SIZE:
        size = _I32.unpack_from(records, pos + LENGTH_OFFSET)[0] + LOG_OVERHEAD
        if pos + size > end:
            break
        found = pos
        pos += size
    if found is None:
        return None
    base = _I64.unpack_from(records, found + BASE_OFFSET_OFFSET)[0]
    return int(base + _I32.unpack_from(records, found + LAST_OFFSET_DELTA_OFFSET)[0] + 1)


def collect_aborted(lg: Log, start: int, records: bytes | bytearray | memoryview
                    ) -> list[tuple[int, int]]:
    """(producer id, first offset) of the aborted transactions overlapping the
    records a read_committed fetch returns from `start`, as Kafka puts them in
    FetchResponse.aborted_transactions."""
    if not records:
        return []
    segments = lg._segments
    i = max(bisect_right(lg._bases, start) - 1, 0)
    return lg.txn_indexes.collect(segments[i:], start, lambda: next_offset_after(records))


# ------------------------------------------------------------------ recovery


def rebuild_txn_indexes(segments: Sequence[LogSegment], recovered: Sequence[LogSegment],
                        producers: ProducerStateManager, log_start_offset: int) -> int:
    """Rewrite the `.txnindex` of each recovered segment from the log (Kafka rebuilds
    it in LogSegment.recover). Transactions open where the scan starts come from the
    newest producer snapshot at or below the first recovered segment. Returns how many
    aborted transactions were indexed."""
    targets = [s for s in segments if any(s is r for r in recovered)]
    if not targets:
        return 0
    first_base = targets[0].base_offset
    start, open_txns = log_start_offset, {}
    for offset in sorted((o for o in producers.snapshots if o <= first_base), reverse=True):
        try:
            entries = read_snapshot(producers.snapshots[offset])
        except (CorruptSnapshot, OSError):
            continue
        start = offset
        open_txns = {e.producer_id: e.current_txn_first_offset for e in entries
                     if e.current_txn_first_offset is not None}
        break
    rebuilt: dict[int, list[AbortedTxnEntry]] = {id(s): [] for s in targets}
    from odradek.storage.loader import producer_batches

    bases = [s.base_offset for s in segments]
    for seg in segments[max(bisect_right(bases, start) - 1, 0):]:
        found = seg.translate_offset(start) if seg.base_offset < start else None
        for pos, h in producer_batches(seg, found.position if found is not None else 0):
            last = h[F_BASE_OFFSET] + h[F_LAST_DELTA]
            if last < start:
                continue
            pid, attrs = h[F_PID], h[F_ATTRS]
            if not attrs & ATTR_TRANSACTIONAL:
                continue
            if not attrs & ATTR_CONTROL:
                open_txns.setdefault(pid, h[F_BASE_OFFSET])
                continue
            first = open_txns.pop(pid, None)
            target = rebuilt.get(id(seg))
            if first is None or target is None:
                continue
            if control_type(seg, pos, h) is ControlType.ABORT:
                lso = min(open_txns.values()) if open_txns else last + 1
                target.append(AbortedTxnEntry(pid, first, last, lso))
    count = 0
    for seg in targets:
        write_index(seg, rebuilt[id(seg)])
        count += len(rebuilt[id(seg)])
    return count
