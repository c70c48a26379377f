"""LogLoader: opening a partition directory, and recovering it after a crash.

Separate from the running log, as in Kafka. What it does, in order:
1. finishes interrupted file operations: `.deleted` and `.cleaned` files go, a
   `.swap` segment (a finished compaction) replaces the segments it covers, unless a
   `.cleaned` file shows its cleaning never finished;
2. drops index files whose `.log` is gone;
3. after a clean shutdown trusts the files, with cheap sanity checks of each index
   (first and last entry, the last entry pointing at a real batch) and of the active
   segment's tail; a segment that fails is recovered;
   otherwise recovers every segment from the one holding the recovery point: each
   batch's header, size, CRC and offsets are checked, indexes rebuilt, and the log is
   cut at the first bad or torn batch (later segments go too);
4. rebuilds producer state from the newest usable snapshot plus the batches after it,
   and trims the leader epoch cache to the log that survived;
5. rebuilds the `.txnindex` of every recovered segment (storage/transactions.py).

Segments below the recovery point were fsynced before the point advanced; they are
never scanned, so nothing flushed is lost and a restart costs O(unflushed data).
"""

from __future__ import annotations

import logging
import os
import struct
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from odradek.protocol.batch import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    F_ATTRS,
    F_BASE_OFFSET,
    F_BASE_SEQ,
    F_EPOCH,
    F_LAST_DELTA,
    F_MAX_TS,
    F_PEPOCH,
    F_PID,
)
from odradek.protocol.errors import CorruptMessage
from odradek.storage.epochs import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from odradek.storage.index import CorruptIndex
from odradek.storage.log_config import LogConfig
from odradek.storage.log_types import parse_topic_partition
from odradek.storage.producer_state import ProducerStateManager
from odradek.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    segment_file,
)
from odradek.storage.segment_recovery import check_segment, producer_batches
from odradek.storage.transactions import rebuild_txn_indexes

log = logging.getLogger(__name__)

_INDEX_KINDS = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


@dataclass(slots=True)
class LoadedLog:
    segments: list[LogSegment]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    bytes_truncated: int  # dropped by recovery: a torn or corrupt tail


@dataclass(slots=True)
class LoadedPartition(LoadedLog):
    """A partition directory loaded: its segments and offsets, and the leader epochs
    and producer state that go with them."""

    leader_epochs: LeaderEpochFileCache
    producer_state: ProducerStateManager


def load_partition(directory: Path, config: LogConfig, *, recovery_point: int,
                   log_start_offset: int, clean_shutdown: bool, now_ms: int,
                   producer_id_expiration_ms: int, must_exist: bool,
                   new: bool = False) -> LoadedPartition:
    """Open (creating it unless `must_exist`) and recover a partition directory, as
    Kafka's UnifiedLog factory does with its LogLoader; an unreadable epoch file is
    rebuilt from the batches that survived. `new`: the caller has just made the
    directory, so there is nothing in it to list or read (CreateTopics makes thousands
    of partitions, and each of these system calls counts)."""
    parse_topic_partition(directory.name)
    if new:
        listing: list[str] = []
    else:
        if not must_exist:
            directory.mkdir(parents=True, exist_ok=True)
        # listed once for the loader and the producer state (FileNotFoundError: gone)
        listing = os.listdir(directory)
    epochs = LeaderEpochFileCache(directory / LEADER_EPOCH_CHECKPOINT, sync=False, new=new)
    producers = ProducerStateManager(
        directory, producer_id_expiration_ms=producer_id_expiration_ms, listing=listing
    )
    loaded = LogLoader(
        directory, config, recovery_point=recovery_point, log_start_offset=log_start_offset,
        clean_shutdown=clean_shutdown, now_ms=now_ms, leader_epochs=epochs,
        producer_state=producers, listing=listing,
    ).load()  # fmt: skip
    if epochs.damaged is not None:
        epochs.rebuild(
            (h[F_EPOCH], h[F_BASE_OFFSET])
            for seg in loaded.segments for _, h in seg.batches_from()
        )  # fmt: skip
    return LoadedPartition(
        loaded.segments, loaded.log_start_offset, loaded.log_end_offset,
        loaded.recovery_point, loaded.bytes_truncated, epochs, producers,
    )  # fmt: skip


def _base_offset_of(name: str) -> int | None:
    stem = name.split(".", 1)[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def replay_producer_state(
    segments: Sequence[LogSegment], producers: ProducerStateManager, start: int, end: int
) -> None:
    """Feed producer state the batches in [start, end), headers only."""
    if start >= end:
        return
    bases = [s.base_offset for s in segments]
    first = max(bisect_right(bases, start) - 1, 0)
    for seg in segments[first:]:
        if seg.base_offset >= end:
            break
        found = seg.translate_offset(start) if seg.base_offset < start else None
        position = found.position if found is not None else 0
        for _, h in producer_batches(seg, position):
            last = h[F_BASE_OFFSET] + h[F_LAST_DELTA]
            if h[F_BASE_OFFSET] >= end:
                break
            if last < start:
                continue
            producers.replay_batch(
                producer_id=h[F_PID],
                epoch=h[F_PEPOCH],
                base_sequence=h[F_BASE_SEQ],
                base_offset=h[F_BASE_OFFSET],
                last_offset_delta=h[F_LAST_DELTA],
                max_timestamp=h[F_MAX_TS],
                transactional=bool(h[F_ATTRS] & ATTR_TRANSACTIONAL),
                control=bool(h[F_ATTRS] & ATTR_CONTROL),
            )


def rebuild_producer_state(
    segments: Sequence[LogSegment],
    producers: ProducerStateManager,
    log_start_offset: int,
    log_end_offset: int,
    now_ms: int,
) -> None:
    """Newest snapshot ≤ the log end, then the batches after it; snapshot the result."""
    producers.truncate_and_reload(log_start_offset, log_end_offset, now_ms)
    replay_producer_state(segments, producers, producers.map_end_offset, log_end_offset)
    producers.update_map_end_offset(log_end_offset)
    producers.take_snapshot(sync=False)


class LogLoader:
    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int,
        log_start_offset: int,
        clean_shutdown: bool,
        now_ms: int,
        leader_epochs: LeaderEpochFileCache,
        producer_state: ProducerStateManager,
        listing: list[str] | None = None,
    ) -> None:
        self.directory = directory
        self.listing = listing
        self.config = config
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset
        self.clean_shutdown = clean_shutdown
        self.now_ms = now_ms
        self.leader_epochs = leader_epochs
        self.producer_state = producer_state
        self.bytes_truncated = 0
        self._recovered: list[LogSegment] = []

    # -------------------------------------------------------------- files

    def _finish_file_operations(self, names: list[str]) -> bool:
        """True if it changed the directory's files."""
        if not any(n.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, ".tmp"))
                   for n in names):
            return False  # the usual case: nothing was interrupted
        names = sorted(names)
        cleaned = [_base_offset_of(n) for n in names if n.endswith(CLEANED_SUFFIX)]
        min_cleaned = min((b for b in cleaned if b is not None), default=None)
        swaps: list[int] = []
        for name in names:
            path = self.directory / name
            if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX)) or name.endswith(".tmp"):
                log.info("removing leftover %s", path)
                path.unlink(missing_ok=True)
            elif name.endswith(SWAP_SUFFIX):
                base = _base_offset_of(name)
                if name.endswith(LOG_SUFFIX + SWAP_SUFFIX) and base is not None:
                    if min_cleaned is not None and base >= min_cleaned:
                        log.info("removing %s: its cleaning did not finish", path)
                        path.unlink(missing_ok=True)
                    else:
                        swaps.append(base)
                else:
                    path.unlink(missing_ok=True)  # index swaps are rebuilt
        for base in swaps:
            self._complete_swap(base)
        return True

    def _complete_swap(self, base: int) -> None:
        swap = LogSegment(self.directory, base, self.config, self.now_ms, suffix=SWAP_SUFFIX)
        swap.recover()
        end = swap.next_offset
        for name in os.listdir(self.directory):
            other = _base_offset_of(name)
            if (
                name.endswith(LOG_SUFFIX)
                and other is not None
                and base <= other < max(end, base + 1)
            ):
                for kind in (LOG_SUFFIX, *_INDEX_KINDS):
                    segment_file(self.directory, other, kind).unlink(missing_ok=True)
        swap.change_file_suffixes(SWAP_SUFFIX, "")
        swap.close()
        log.info("completed the swap of segment %d in %s", base, self.directory)

    def _drop_orphan_indexes(self, listed: list[str]) -> None:
        names = set(listed)
        for name in listed:
            if name.endswith(_INDEX_KINDS):
                base = _base_offset_of(name)
                if base is not None and f"{base:020d}{LOG_SUFFIX}" not in names:
                    log.info("removing index %s without a log", name)
                    (self.directory / name).unlink(missing_ok=True)

    def _open_segments(self, names: list[str]) -> list[LogSegment]:
        bases = sorted(
            b
            for n in names
            if n.endswith(LOG_SUFFIX) and (b := _base_offset_of(n)) is not None
        )
        return [LogSegment(self.directory, b, self.config, self.now_ms) for b in bases]

    # -------------------------------------------------------------- recovery

    def _recover(self, segments: list[LogSegment], i: int) -> bool:
        """Recover segments[i]; if it lost bytes, delete every later segment. True if cut."""
        seg = segments[i]
        truncated = seg.recover(self.leader_epochs.assign, self.leader_epochs.latest_epoch)
        self._recovered.append(seg)
        self.bytes_truncated += truncated
        if truncated and i + 1 < len(segments):
            for later in segments[i + 1 :]:
                log.warning("deleting %s: it follows a truncated segment", later.log_path)
                later.delete()
            del segments[i + 1 :]
        return truncated > 0

    def _check_or_recover(self, segments: list[LogSegment], i: int) -> bool:
        seg = segments[i]
        try:
            check_segment(seg)
            if i == len(segments) - 1:
                _, end = seg.scan_tail()
                if end != seg.size:
                    raise CorruptIndex(f"{seg.log_path} ends with a torn batch at {end}")
        except (CorruptIndex, CorruptMessage, ValueError, OSError, struct.error) as exc:
            log.warning("recovering %s: %s", seg.log_path, exc)
            return self._recover(segments, i)
        return False

    def _trust(self, segments: list[LogSegment], end: int, names: set[str]) -> bool:
        """Leave the indexes of segments[:end] unread until first use (Kafka checks
        only that the offset index exists); one whose index files are not in the
        listing is recovered now. True if a recovery cut the log."""
        for i, seg in enumerate(segments[:end]):
            prefix = f"{seg.base_offset:020d}"
            if seg.size == 0 or (prefix + INDEX_SUFFIX in names
                                 and prefix + TIME_INDEX_SUFFIX in names):
                seg.defer_index_check()
            elif self._check_or_recover(segments, i):
                return True
        return False

    def load(self) -> LoadedLog:
        # one listing of the directory serves every step (thousands of partitions each
        # listed three times was a visible share of a restart)
        names = os.listdir(self.directory) if self.listing is None else self.listing
        if self._finish_file_operations(names):
            names = os.listdir(self.directory)
        self._drop_orphan_indexes(names)
        segments = self._open_segments(names)
        if self.clean_shutdown:
            # the active segment is checked now (its tail gives the log end); the
            # others when first used
            if not self._trust(segments, len(segments) - 1, set(names)) and segments:
                self._check_or_recover(segments, len(segments) - 1)
        else:
            bases = [s.base_offset for s in segments]
            first_unflushed = max(bisect_right(bases, self.recovery_point) - 1, 0)
            if not self._trust(segments, first_unflushed, set(names)):
                i = first_unflushed
                while i < len(segments):
                    if self._recover(segments, i):
                        break
                    i += 1

        for seg in segments[:-1]:
            # Recovery reopened their index files; only the active segment appends.
            seg.close_index_handles()
        if not segments:
            segments.append(
                LogSegment(
                    self.directory, self.log_start_offset, self.config, self.now_ms, create=True
                )
            )
        log_end = segments[-1].next_offset
        log_start = max(self.log_start_offset, segments[0].base_offset)
        if log_end < log_start:
            log.warning(
                "%s: log end %d is below the log start %d; starting empty at %d",
                self.directory, log_end, log_start, log_start,
            )
            for seg in segments:
                seg.delete()
            segments[:] = [
                LogSegment(self.directory, log_start, self.config, self.now_ms, create=True)
            ]
            log_end = log_start
            self.leader_epochs.clear()
            self.producer_state.truncate_fully_and_start_at(log_start)

        # After a crash, as Kafka's LogLoader: what recovery checked is not fsynced here
        # (three fsyncs per partition made a restart of thousands of partitions take
        # minutes); the recovery point stays where it was, so a second crash checks the
        # same segments again, and the log's next flush moves it. After a clean stop the
        # few segments that failed their sanity check are synced at once.
        if self.clean_shutdown:
            for seg in self._recovered:
                if not seg.closed:
                    seg.flush()
        recovered = {id(seg) for seg in self._recovered}
        for seg in segments:
            if id(seg) not in recovered:
                seg.mark_flushed()  # after a clean stop, or below the recovery point
        recovery_point = log_end if self.clean_shutdown else min(self.recovery_point, log_end)

        self.leader_epochs.truncate_from_end(log_end, write=False)
        self.leader_epochs.truncate_from_start(log_start)
        self.producer_state.remove_stray_snapshots([s.base_offset for s in segments])
        rebuild_producer_state(segments, self.producer_state, log_start, log_end, self.now_ms)
        if self._recovered:
            rebuild_txn_indexes(segments, self._recovered, self.producer_state, log_start)
        return LoadedLog(segments, log_start, log_end, recovery_point, self.bytes_truncated)
