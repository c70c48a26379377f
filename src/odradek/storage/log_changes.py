"""Changes to a log's list of segments: truncation, retention's deletes, the cleaner's swap.

Each is a function over a `Log` and its private state (segments, base offsets, lock,
counters): they are the log's own methods, kept in their own module so log.py holds
appends and reads. Every change runs on the log's owner thread with the log's lock
held; readers take no lock, and no list a reader may hold is mutated except by the
owner thread.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from odradek.storage.checkpoints import fsync_dir
from odradek.storage.loader import rebuild_producer_state
from odradek.storage.segment import CLEANED_SUFFIX, SWAP_SUFFIX, LogSegment

if TYPE_CHECKING:
    from odradek.storage.log import Log

log = logging.getLogger(__name__)


# ------------------------------------------------------------------ truncation


def truncate_to(lg: Log, offset: int) -> bool:
    with lg._lock:
        lg._check_open()
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= lg._log_end_offset:
            return False
        if offset < lg._bases[0]:
            truncate_fully_and_start_at(lg, offset)
            return True
        now = lg._clock()
        while len(lg._segments) > 1 and lg._segments[-1].base_offset > offset:
            lg._segments.pop().delete()
            lg._bases.pop()
        active = lg._segments[-1]
        active.truncate_to(offset, now)
        active.resize_indexes(lg.config.segment_index_bytes)
        active.index_interval_bytes = lg.config.index_interval_bytes
        lg._log_end_offset = active.next_offset
        _after_truncation(lg, now)
        return True


def _after_truncation(lg: Log, now: int) -> None:
    lg._truncations += 1
    leo = lg._log_end_offset
    lg.recovery_point = min(lg.recovery_point, leo)
    lg._high_watermark = min(lg._high_watermark, leo)
    lg._max_pos_cache = None
    lg.leader_epochs.truncate_from_end(leo)
    rebuild_producer_state(lg._segments, lg.producer_state, lg.log_start_offset, leo, now)
    lg.txn_indexes.truncate_to(lg._segments[-1], leo)


def truncate_fully_and_start_at(lg: Log, offset: int) -> None:
    with lg._lock:
        lg._check_open()
        now = lg._clock()
        for seg in lg._segments:
            seg.delete()
        segment = LogSegment(lg.directory, offset, lg.config, now, create=True)
        lg._segments = [segment]
        lg._bases = [offset]
        lg._dir_dirty = True
        lg._log_end_offset = offset
        lg._truncations += 1
        lg.log_start_offset = offset
        lg.recovery_point = offset
        lg._high_watermark = offset
        lg._max_pos_cache = None
        lg.leader_epochs.clear()
        lg.producer_state.truncate_fully_and_start_at(offset)


# ------------------------------------------------------------------ retention


def delete_oldest_segments(lg: Log, count: int, reason: str) -> int:
    """Remove the `count` oldest segments: the log start moves to the base of the
    segment that follows; the files are renamed `.deleted` and removed
    `file.delete.delay.ms` later. Removing every segment first rolls a new empty one,
    as Kafka does, so the log always has an active segment and its end offset stays."""
    with lg._lock:
        lg._check_open()
        count = min(count, len(lg._segments))
        try:
            if count == len(lg._segments) and count > 0:
                if lg._segments[-1].size == 0:
                    count -= 1  # already an empty active segment: it stays
                else:
                    lg._roll(lg._log_end_offset, lg._clock())
            if count <= 0:
                return 0
            doomed = lg._segments[:count]
            lg.increment_log_start_offset(lg._segments[count].base_offset)
            del lg._segments[:count]
            del lg._bases[:count]
            lg._max_pos_cache = None
            lg._dir_dirty = True
            lg._delete_later(doomed)
            lg.producer_state.delete_snapshots_before(lg.log_start_offset)
        except OSError as exc:
            raise lg._io_failed(f"deleting segments ({reason})", exc) from exc
    log.info(
        "%s-%d: deleted %d segment(s) up to offset %d (%s); log start is now %d",
        lg.topic, lg.partition, len(doomed), doomed[-1].base_offset, reason,
        lg.log_start_offset,
    )  # fmt: skip
    return len(doomed)


# ------------------------------------------------------------------ compaction


def replace_segments(lg: Log, cleaned: LogSegment, old: list[LogSegment], truncations: int) -> bool:
    """Swap a flushed `.cleaned` segment in for the consecutive segments `old`, which go
    `.deleted` (Kafka's replaceSegments). Crash safe: `.cleaned` → `.swap`, the old
    files renamed, `.swap` → live; the loader completes a swap cut short, deleting the
    segments the `.swap` covers (the cleaner keeps each group's last batch so that the
    cleaned segment ends where the group did).

    Returns False, changing nothing, when the log moved on while the cleaner worked (a
    truncation, a retention delete, a close): the caller discards its work."""
    with lg._lock:
        if lg.closed or lg.offline or truncations != lg._truncations or not old:
            return False
        n = len(old)
        try:
            i = lg._segments.index(old[0])
        except ValueError:
            return False
        # Never the active segment; and exactly these segment objects, still live.
        if i + n >= len(lg._segments) or lg._segments[i : i + n] != old:
            return False
        try:
            cleaned.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
            lg._segments[i : i + n] = [cleaned]
            lg._bases[i : i + n] = [cleaned.base_offset]
            lg._max_pos_cache = None
            lg._delete_later(old)
            cleaned.change_file_suffixes(SWAP_SUFFIX, "")
            fsync_dir(lg.directory)
        except OSError as exc:
            raise lg._io_failed("swapping in a cleaned segment", exc) from exc
        return True
