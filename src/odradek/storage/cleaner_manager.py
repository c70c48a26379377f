"""Which compacted log to clean next, the cleaner threads, and `cleaner-offset-checkpoint`.

Kafka's LogCleanerManager and LogCleaner:
- each log dir's `cleaner-offset-checkpoint` holds, per compacted partition, the first
  offset not yet cleaned (the start of its dirty section);
- a log is cleanable when its dirty bytes are more than `min.cleanable.dirty.ratio` of
  its bytes, or when `max.compaction.lag.ms` has passed over dirty data; the dirtiest
  goes first; it is then "in progress" until the cleaning ends;
- `log.cleaner.threads` threads each take the dirtiest log, clean it and sleep
  `log.cleaner.backoff.ms` when there is nothing to do.

Beyond Kafka: a log whose tombstones or markers were given a delete horizon is cleaned
again once that horizon has passed, even with no new writes (Kafka waits for the log to
become dirty again, so a quiet topic keeps its tombstones). The horizons are kept in
memory only: after a restart a log waits for new writes, as Kafka's do.

Coordination with the rest of the broker is non-blocking: `abort` marks a log's
cleaning as aborted (the cleaner checks between batches, and the swap — which runs on
the log's owner thread — refuses it), `pause` keeps a log from being chosen (a move
between log dirs), and retention leaves alone a log that is `in_progress`.
"""

from __future__ import annotations

import concurrent.futures
import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from odradek.protocol.errors import KafkaStorageError
from odradek.storage.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    CheckpointError,
    TopicPartition,
    read_offsets,
    write_offsets,
)
from odradek.storage.cleaner import (
    Cleaner,
    CleanerStats,
    CleaningAborted,
    LogToClean,
    Owner,
    Throttler,
)
from odradek.storage.log import Log
from odradek.storage.offset_map import OffsetMap
from odradek.storage.segment import LogSegment

log = logging.getLogger(__name__)

LogsProvider = Callable[[], Iterable[tuple[TopicPartition, Log]]]


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The `log.cleaner.*` broker properties, Kafka's defaults."""

    enable: bool = True
    num_threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    io_buffer_size: int = 512 * 1024
    io_max_bytes_per_second: float = float("inf")
    backoff_ms: int = 15_000


class _State(enum.Enum):
    CLEANING = "cleaning"
    ABORTED = "aborted"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _direct(fn: Callable[[], bool]) -> bool:
    return fn()


def owner_via(schedule: Callable[[Callable[[], None]], object],
              timeout_s: float = 60.0) -> Owner:
    """An Owner that hands each call to another thread through `schedule` (the broker
    passes its event loop's `call_soon_threadsafe`) and waits for the result.

    A call not started within `timeout_s` is cancelled and answers False (the cleaner
    then drops its work); one already running is waited for, however long it takes —
    giving up on a swap in progress would let the cleaner delete files the log now
    uses. A `schedule` that fails (the loop is closed) also answers False."""

    def call(fn: Callable[[], bool]) -> bool:
        lock = threading.Lock()
        state = ["pending"]
        done: concurrent.futures.Future[bool] = concurrent.futures.Future()

        def run() -> None:
            with lock:
                if state[0] == "cancelled":
                    return
                state[0] = "running"
            try:
                done.set_result(fn())
            except BaseException as exc:
                done.set_exception(exc)

        try:
            schedule(run)
        except RuntimeError:
            return False
        try:
            return done.result(timeout_s)
        except concurrent.futures.TimeoutError:
            with lock:
                if state[0] == "pending":
                    state[0] = "cancelled"
                    return False
            return done.result()

    return call


def first_unstable_offset(lg: Log) -> int | None:
    """The first offset of the oldest open transaction (Kafka's firstUnstableOffset)."""
    with lg.lock:
        firsts = [
            e.current_txn_first_offset
            for e in lg.producer_state.producers.values()
            if e.current_txn_first_offset is not None
        ]
    return min(firsts) if firsts else None


def _non_active_from(segments: tuple[LogSegment, ...], offset: int) -> list[LogSegment]:
    """The segments from the one holding `offset` on, the active one excepted."""
    out = []
    for i, seg in enumerate(segments[:-1]):
        if segments[i + 1].base_offset > offset:
            out.append(seg)
    return out


def cleanable_offsets(
    lg: Log, last_clean: int | None, now: int
) -> tuple[int, int, bool]:
    """(first dirty offset, first uncleanable offset, reset the checkpoint?) — Kafka's
    LogCleanerManager.cleanableOffsets."""
    start = lg.log_start_offset
    checkpoint = start if last_clean is None else last_clean
    if checkpoint < start or checkpoint > lg.log_end_offset:
        first_dirty, force = start, last_clean is not None
    else:
        first_dirty, force = checkpoint, False
    segments = lg.segments
    bounds = [lg.high_watermark, segments[-1].base_offset]
    unstable = first_unstable_offset(lg)
    if unstable is not None:
        bounds.append(unstable)
    min_lag = max(lg.config.min_compaction_lag_ms, 0)
    if min_lag > 0:
        for seg in _non_active_from(segments, first_dirty):
            if seg.max_timestamp > now - min_lag:
                bounds.append(seg.base_offset)
                break
    return first_dirty, max(first_dirty, min(bounds)), force


def max_compaction_delay(lg: Log, first_dirty: int, now: int) -> int:
    """How far past `max.compaction.lag.ms` the oldest dirty data is (0: not yet)."""
    firsts = [
        ts
        for seg in _non_active_from(lg.segments, first_dirty)
        if (ts := seg.rolling_timestamp()) > 0
    ]
    if not firsts:
        return 0
    clean_until = now - max(lg.config.max_compaction_lag_ms, 0)
    earliest = min(firsts)
    return clean_until - earliest if earliest < clean_until else 0


def log_to_clean(
    tp: TopicPartition, lg: Log, first_dirty: int, uncleanable: int, need_now: bool
) -> LogToClean:
    segments = lg.segments
    non_active = _non_active_from(segments, uncleanable)
    first_uncleanable = non_active[0].base_offset if non_active else segments[-1].base_offset
    clean_bytes = sum(s.size for s in segments if s.base_offset < first_dirty)
    low = min(first_dirty, first_uncleanable)
    cleanable = sum(
        s.size
        for i, s in enumerate(segments)
        if s.base_offset < first_uncleanable
        and (i + 1 == len(segments) or segments[i + 1].base_offset > low)
    )
    return LogToClean(tp, lg, first_dirty, first_uncleanable, clean_bytes, cleanable, need_now)


class LogCleanerManager:
    """The cleaner's bookkeeping; thread safe."""

    def __init__(self, log_dirs: Iterable[Path], logs: LogsProvider,
                 clock: Callable[[], int] = _now_ms) -> None:
        self._logs = logs
        self._clock = clock
        self._lock = threading.Lock()
        self._checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        for d in log_dirs:
            try:
                self._checkpoints[d] = read_offsets(d / CLEANER_OFFSET_CHECKPOINT)
            except (CheckpointError, OSError) as exc:
                log.warning("ignoring the damaged checkpoint %s (%s): cleaner offsets "
                            "dropped, each compacted log is cleaned again from its start",
                            d / CLEANER_OFFSET_CHECKPOINT, exc)
                self._checkpoints[d] = {}
        self._in_progress: dict[TopicPartition, _State] = {}
        self._paused: dict[TopicPartition, int] = {}
        self._horizons: dict[TopicPartition, int] = {}
        self._uncleanable: set[TopicPartition] = set()
        self.stopping = False
        self.dirtiest_ratio = 0.0

    # -------------------------------------------------------------- checkpoints

    def checkpoint_of(self, tp: TopicPartition) -> int | None:
        with self._lock:
            for offsets in self._checkpoints.values():
                if tp in offsets:
                    return offsets[tp]
        return None

    def _write(self, directory: Path) -> None:
        try:
            write_offsets(directory / CLEANER_OFFSET_CHECKPOINT, self._checkpoints[directory])
        except OSError as exc:
            log.error("could not write %s: %s", directory / CLEANER_OFFSET_CHECKPOINT, exc)

    def update_checkpoint(self, tp: TopicPartition, directory: Path, offset: int | None) -> None:
        """Set (or, with None, remove) a partition's entry in its dir's checkpoint."""
        with self._lock:
            offsets = self._checkpoints.setdefault(directory, {})
            if offset is None:
                if offsets.pop(tp, None) is None:
                    return
            else:
                offsets[tp] = offset
            self._write(directory)

    def move_checkpoint(self, tp: TopicPartition, source: Path, target: Path) -> None:
        with self._lock:
            offset = self._checkpoints.get(source, {}).pop(tp, None)
            if offset is None:
                return
            self._write(source)
            self._checkpoints.setdefault(target, {})[tp] = offset
            self._write(target)

    # -------------------------------------------------------------- choosing

    def grab_filthiest(self, now: int | None = None) -> LogToClean | None:
        """The compacted log most in need of cleaning, marked in progress; or None."""
        now = self._clock() if now is None else now
        candidates: list[LogToClean] = []
        with self._lock:
            if self.stopping:
                return None
            busy = set(self._in_progress) | set(self._paused) | self._uncleanable
        for tp, lg in self._logs():
            if tp in busy or not lg.config.compact or lg.closed or lg.offline:
                continue
            directory = lg.directory.parent
            try:
                last = self.checkpoint_of(tp)
                first_dirty, uncleanable, force = cleanable_offsets(lg, last, now)
                if force:
                    self.update_checkpoint(tp, directory, first_dirty)
                delay = max_compaction_delay(lg, first_dirty, now)
                ltc = log_to_clean(tp, lg, first_dirty, uncleanable, delay > 0)
            except (OSError, KafkaStorageError, ValueError) as exc:
                log.warning("cannot weigh %s-%d for cleaning: %s", tp[0], tp[1], exc)
                continue
            if ltc.total_bytes > 0:
                candidates.append(ltc)
        self.dirtiest_ratio = max((c.cleanable_ratio for c in candidates), default=0.0)
        with self._lock:
            horizons = dict(self._horizons)
        cleanable = [
            c for c in candidates
            if (c.need_compaction_now and c.cleanable_bytes > 0)
            or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio
            or horizons.get(c.topic_partition, now + 1) <= now
        ]  # fmt: skip
        if not cleanable:
            return None
        filthiest = max(cleanable, key=lambda c: c.cleanable_ratio)
        with self._lock:
            if self.stopping or filthiest.topic_partition in self._in_progress:
                return None
            self._in_progress[filthiest.topic_partition] = _State.CLEANING
        return filthiest

    # -------------------------------------------------------------- progress

    def in_progress(self, tp: TopicPartition) -> bool:
        with self._lock:
            return tp in self._in_progress

    def aborted(self, tp: TopicPartition) -> bool:
        return self.stopping or self._in_progress.get(tp) is _State.ABORTED

    def check_done(self, tp: TopicPartition) -> None:
        """Raises CleaningAborted when the cleaning of `tp` must stop."""
        if self.aborted(tp):
            raise CleaningAborted(f"cleaning of {tp[0]}-{tp[1]} aborted")

    def done_cleaning(self, ltc: LogToClean, end_offset: int, stats: CleanerStats) -> None:
        tp = ltc.topic_partition
        with self._lock:
            state = self._in_progress.pop(tp, None)
            horizon = stats.earliest_delete_horizon
            if horizon is None:
                self._horizons.pop(tp, None)
            else:
                self._horizons[tp] = horizon
        if state is _State.CLEANING:
            self.update_checkpoint(tp, ltc.log.directory.parent, end_offset)

    def cleaning_ended(self, tp: TopicPartition, *, failed: bool = False) -> None:
        """An aborted or failed cleaning; a failed log is not tried again until restart."""
        with self._lock:
            self._in_progress.pop(tp, None)
            if failed:
                self._uncleanable.add(tp)

    def abort(self, tp: TopicPartition) -> None:
        """Make a cleaning of `tp` in progress give up; returns at once."""
        with self._lock:
            if tp in self._in_progress:
                self._in_progress[tp] = _State.ABORTED

    def pause(self, tp: TopicPartition) -> None:
        with self._lock:
            self._paused[tp] = self._paused.get(tp, 0) + 1
            if tp in self._in_progress:
                self._in_progress[tp] = _State.ABORTED

    def resume(self, tp: TopicPartition) -> None:
        with self._lock:
            count = self._paused.get(tp, 0) - 1
            if count > 0:
                self._paused[tp] = count
            else:
                self._paused.pop(tp, None)

    def remove(self, tp: TopicPartition, directory: Path) -> None:
        """The partition is gone (deleted): abort, forget it, drop its checkpoint entry."""
        self.abort(tp)
        with self._lock:
            self._horizons.pop(tp, None)
            self._uncleanable.discard(tp)
        self.update_checkpoint(tp, directory, None)

    @property
    def uncleanable(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._uncleanable)


class LogCleaner:
    """`log.cleaner.threads` threads cleaning the filthiest compacted logs."""

    def __init__(self, config: CleanerConfig, manager: LogCleanerManager, *,
                 owner: Owner = _direct, clock: Callable[[], int] = _now_ms) -> None:
        self.config = config
        self.manager = manager
        self.owner = owner
        self.clock = clock
        self._threads: list[threading.Thread] = []
        self._wake = threading.Event()
        self._stop = threading.Event()
        threads = max(1, config.num_threads)
        self._throttler = Throttler(config.io_max_bytes_per_second)
        self._map_bytes = max(config.dedupe_buffer_size // threads, 1)
        self.cleanings = 0  # completed cleanings, for tests and metrics
        self.last_stats: CleanerStats | None = None

    def new_cleaner(self, cleaner_id: int = 0) -> Cleaner:
        return Cleaner(
            cleaner_id,
            OffsetMap(self._map_bytes),
            owner=self.owner,
            check_done=self.manager.check_done,
            io_buffer_size=max(self.config.io_buffer_size // 2, 64 * 1024),
            clock=self.clock,
            throttler=self._throttler,
        )

    def startup(self) -> None:
        for i in range(max(1, self.config.num_threads)):
            thread = threading.Thread(target=self._run, args=(i,),
                                      name=f"odradek-log-cleaner-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def wake(self) -> None:
        """Look for work now rather than after the backoff."""
        self._wake.set()

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop the threads; a cleaning in flight is abandoned (its `.cleaned` files go).

        Must not run on the logs' owner thread while a swap may be waiting for it."""
        self.manager.stopping = True
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout_s)
        self._threads.clear()

    def _run(self, cleaner_id: int) -> None:
        cleaner = self.new_cleaner(cleaner_id)
        while not self._stop.is_set():
            try:
                worked = self.clean_filthiest(cleaner)
            except Exception:
                log.exception("log cleaner thread %d failed", cleaner_id)
                worked = False
            if not worked:
                self._wake.wait(self.config.backoff_ms / 1000)
                self._wake.clear()

    def clean_filthiest(self, cleaner: Cleaner) -> bool:
        """Clean the dirtiest log, if any is dirty enough. True if one was taken."""
        ltc = self.manager.grab_filthiest(self.clock())
        if ltc is None:
            return False
        tp = ltc.topic_partition
        try:
            end_offset, stats = cleaner.clean(ltc)
        except CleaningAborted as exc:
            log.info("%s", exc)
            self.manager.cleaning_ended(tp)
            return True
        except (KafkaStorageError, OSError) as exc:
            log.warning("cleaning %s-%d stopped: %s", tp[0], tp[1], exc)
            self.manager.cleaning_ended(tp)
            return True
        except Exception as exc:
            if self.manager.aborted(tp):  # the log was closed under the cleaner
                log.info("cleaning of %s-%d aborted: %s", tp[0], tp[1], exc)
                self.manager.cleaning_ended(tp)
                return True
            log.exception("cleaning %s-%d failed; it will not be cleaned again until "
                          "the broker restarts", tp[0], tp[1])
            self.manager.cleaning_ended(tp, failed=True)
            return True
        self.manager.done_cleaning(ltc, end_offset, stats)
        self.cleanings += 1
        self.last_stats = stats
        _log_stats(ltc, end_offset, stats)
        return True


def _log_stats(ltc: LogToClean, end_offset: int, stats: CleanerStats) -> None:
    mb = 1024 * 1024
    secs = stats.elapsed_s
    log.info(
        "cleaned %s-%d (dirty section [%d, %d)): %.1f MB of log in %.2f s (%.1f MB/s); "
        "%d of %d records kept, %.1f MB → %.1f MB; offset map %.0f%% full; "
        "%d records without a key dropped",
        ltc.topic_partition[0], ltc.topic_partition[1], ltc.first_dirty_offset, end_offset,
        stats.bytes_read / mb, secs, stats.bytes_read / mb / secs, stats.messages_written,
        stats.messages_read, stats.bytes_read / mb, stats.bytes_written / mb,
        100 * stats.buffer_utilization, stats.invalid_messages,
    )  # fmt: skip
