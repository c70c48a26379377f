"""Retention: deleting a log's oldest segments, as Kafka's UnifiedLog.deleteOldSegments.

Three reasons, checked in Kafka's order every `log.retention.check.interval.ms`:
- log start offset breach: a segment wholly below the log start (DeleteRecords moved
  it) goes, whatever the cleanup policy;
- with `cleanup.policy` including `delete`:
  - `retention.bytes` (per partition): the oldest segments go while the log stays at
    or above the bound without them;
  - `retention.ms`: a segment goes when its largest record timestamp (its file's
    modification time if it holds no timestamp) is older than `retention.ms`.
Segments go oldest first and stop at the first that must stay. None at or above the
high watermark goes, so the log start never passes it. The active segment is never
deleted while active: when it has expired too, the log first rolls a new, empty active
segment (Kafka does the same), so an idle topic does empty itself — its log end offset
stays, and producers and consumers carry on from there.
Files are renamed `.deleted` and removed `file.delete.delay.ms` later; the log start
offset, and with it ListOffsets(earliest), moves at once.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from odradek.protocol.errors import KafkaStorageError, OffsetOutOfRange, PolicyViolation
from odradek.storage.log import Log
from odradek.storage.segment import LogSegment

Predicate = Callable[[LogSegment, LogSegment | None], bool]


def largest_timestamp(segment: LogSegment) -> int:
    """The segment's largest record timestamp, or its file's mtime when it has none."""
    ts = segment.max_timestamp
    if ts >= 0:
        return ts
    try:
        return int(os.stat(segment.log_path).st_mtime * 1000)
    except OSError:
        return -1


def deletable_count(lg: Log, predicate: Predicate) -> int:
    """How many of the oldest segments satisfy `predicate` in a row (Kafka's
    deletableSegments): never one reaching above the high watermark, never a last
    segment that is empty."""
    segments = lg.segments
    hw = lg.high_watermark
    count = 0
    for i, seg in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        upper = nxt.base_offset if nxt is not None else lg.log_end_offset
        if nxt is None and seg.size == 0:
            break
        if hw < upper or not predicate(seg, nxt):
            break
        count += 1
    return count


def _log_start_breached(lg: Log) -> Predicate:
    start = lg.log_start_offset
    return lambda _seg, nxt: nxt is not None and nxt.base_offset <= start


def _size_breached(lg: Log) -> Predicate | None:
    limit = lg.config.retention_bytes
    size = lg.size_in_bytes
    if limit < 0 or size < limit:
        return None
    excess = [size - limit]

    def breached(seg: LogSegment, _nxt: LogSegment | None) -> bool:
        if excess[0] - seg.size >= 0:
            excess[0] -= seg.size
            return True
        return False

    return breached


def _time_breached(lg: Log, now_ms: int) -> Predicate | None:
    retention = lg.config.retention_ms
    if retention < 0:
        return None
    return lambda seg, _nxt: now_ms - largest_timestamp(seg) > retention


def delete_old_segments(lg: Log, now_ms: int) -> int:
    """Apply retention to one log; returns the number of segments deleted.

    Runs on the log's owner thread (it changes the segment list)."""
    if lg.closed or lg.offline:
        return 0
    total = 0
    with lg.lock:
        checks: list[tuple[str, Callable[[], Predicate | None]]] = [
            ("log start offset breach", lambda: _log_start_breached(lg)),
        ]
        if lg.config.delete:
            checks += [
                ("retention.bytes breach", lambda: _size_breached(lg)),
                ("retention.ms breach", lambda: _time_breached(lg, now_ms)),
            ]
        for reason, make in checks:
            predicate = make()
            if predicate is None:
                continue
            count = deletable_count(lg, predicate)
            if count:
                total += lg.delete_oldest_segments(count, reason)
    return total


def delete_records(lg: Log, offset: int, being_cleaned: bool = False) -> int:
    """DeleteRecords (Kafka's Partition.deleteRecordsOnLeader): move the log start to
    `offset` (-1: the high watermark) and return the new low watermark. Segments wholly
    below it go at once, unless the cleaner is busy with the log (`being_cleaned`; then
    at the next retention check). Runs on the log's owner thread.

    PolicyViolation on a topic without `delete` in its cleanup.policy; OffsetOutOfRange
    for an offset below 0 (other than -1) or above the high watermark."""
    name = f"{lg.topic}-{lg.partition}"
    if not lg.config.delete:
        raise PolicyViolation(
            f"Records of partition {name} can not be deleted due to the configured policy "
            f"(cleanup.policy={','.join(lg.config.cleanup_policy)})"
        )
    target = lg.high_watermark if offset == -1 else offset
    if target < 0 or target > lg.high_watermark:
        raise OffsetOutOfRange(
            f"Cannot delete records of {name} up to offset {offset}: the high watermark "
            f"is {lg.high_watermark}"
        )
    with lg.lock:
        if lg.offline or lg.closed:
            raise KafkaStorageError(f"{name} is offline")
        lg.increment_log_start_offset(target)
        if not being_cleaned:
            count = deletable_count(lg, _log_start_breached(lg))
            if count:
                lg.delete_oldest_segments(count, "DeleteRecords")
    return lg.log_start_offset
