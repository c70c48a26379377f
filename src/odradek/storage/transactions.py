"""Transactions in a partition's log: markers, the last stable offset, aborted ranges.

The format and the rules; the `Log` (log.py) applies them when it appends a marker,
replays a follower's batches, answers a read_committed fetch or recovers. Kafka's
semantics:
- a transaction is open in a partition from its producer's first transactional batch
  to the control batch (marker) the coordinator writes at commit or abort; producer
  state keeps each open transaction's first offset (`ProducerStateManager.ongoing`);
- the last stable offset (LSO) is the first offset of the oldest open transaction,
  capped by the high watermark: read_committed consumers read below it only;
- an ABORT marker that closes a transaction adds an entry to the `.txnindex` of the
  segment it lands in, so fetches can tell read_committed consumers which producers'
  records in the range to drop (`Log.collect_aborted_transactions`);
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
from odradek.storage.producer_state import (
    CorruptSnapshot,
    ProducerStateManager,
    read_snapshot,
)
from odradek.storage.segment import (
    LogSegment,
)
from odradek.storage.segment_recovery import producer_batches
from odradek.storage.txn_index import AbortedTxnEntry, write_index

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


# ------------------------------------------------------------------ markers


def marker_batch(*, commit: bool, producer_id: int, producer_epoch: int,
                 coordinator_epoch: int, timestamp: int) -> tuple[bytearray, BatchHeader]:
    """A COMMIT or ABORT marker batch, its offsets to be assigned, and its header."""
    batch = bytearray(encode_control_batch(
        commit=commit, producer_id=producer_id, producer_epoch=producer_epoch,
        coordinator_epoch=coordinator_epoch, timestamp=timestamp))
    return batch, read_header(batch)


def replay(state: ProducerStateManager, buf: bytearray | memoryview,
           batches: Sequence[tuple[int, BatchHeader]]) -> list[tuple[int, int, int]]:
    """Feed producer state batches appended as they are (a follower's append); returns
    (producer id, first offset, marker offset) of the transactions they abort."""
    aborts = []
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
                aborts.append((h.producer_id, first, h.base_offset))
    return aborts


# ------------------------------------------------------------------ reads


def last_stable_offset(high_watermark: int, first_unstable_offset: int | None,
                       log_start_offset: int) -> int:
    """min(first offset of the oldest open transaction, high watermark), never below
    the log start (an open transaction may begin in a deleted segment)."""
    if first_unstable_offset is None or first_unstable_offset >= high_watermark:
        return high_watermark
    return max(first_unstable_offset, log_start_offset)


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
