"""LogManager: the log dirs (`log.dirs`), their checkpoints and the partitions in them.

Startup (log_dir_load.py), per log dir: check or create `meta.properties`, note the
clean-shutdown marker, read the checkpoints and open every `<topic>-<partition>` with
`num.recovery.threads.per.data.dir` threads.

Running: `create` places a new partition in the dir holding the fewest, `delete`
renames it to `<topic>-<partition>.<uuid>-delete` and removes it later,
`checkpoint()` writes the root checkpoint files, `flush_due()` is the broker's
`log.flush.scheduler.interval.ms` timer, `cleanup_logs()` its
`log.retention.check.interval.ms` timer (retention.py), and the log cleaner
(cleaner_manager.py) compacts `cleanup.policy=compact` logs in its own threads.
`shutdown()` stops the cleaner, flushes and closes every log, writes the checkpoints
and then the clean-shutdown markers.

A failed log dir (JBOD): an I/O error in any of its logs, checkpoints or disk checks
takes the whole dir offline, as Kafka does — its partitions answer KafkaStorageError,
DescribeLogDirs reports it, new partitions go elsewhere, nothing is written to it again
(not even a clean-shutdown marker, so the next start recovers it) — while the other
dirs carry on. A dir that cannot be read at start-up is offline from the start.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from odradek.configdef import LONG_MAX
from odradek.protocol.errors import (
    InvalidTopic,
    KafkaError,
    KafkaStorageError,
    LogDirNotFound,
)
from odradek.storage.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    TopicPartition,
    fsync_dir,
    write_atomically,
    write_partition_metadata,
)
from odradek.storage.cleaner import Owner
from odradek.storage.cleaner_manager import CleanerConfig, LogCleaner, LogCleanerManager
from odradek.storage.descriptors import ExhaustionWarnings, is_exhausted
from odradek.storage.dir_checkpoints import DirCheckpoints, sync_new
from odradek.storage.dir_move import PartitionMove
from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig
from odradek.storage.log_deletion import LogDeletions
from odradek.storage.log_dir_load import check_meta_properties, load_dir
from odradek.storage.log_dir_scan import (
    DELETE_DIR_SUFFIX,
    DirAssignments,
    LogDirError,
    StartupAborted,
)
from odradek.storage.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from odradek.storage.retention import delete_old_segments, delete_records

log = logging.getLogger(__name__)

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")




@dataclass(frozen=True, slots=True)
class LogDirUsage:
    """What DescribeLogDirs reports for one dir."""

    path: Path
    total_bytes: int
    usable_bytes: int
    partitions: dict[TopicPartition, int] = field(default_factory=dict)  # size in bytes
    offline: bool = False
    error: str | None = None  # why the dir is offline
    future_partitions: dict[TopicPartition, int] = field(default_factory=dict)  # moving in


_DEFAULT_CONFIG = LogConfig()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# A start-up that loaded this many logs freezes its heap (gc.freeze) before the
# collector runs again; a few (tests, a small broker) leave it to the collector. So
# does each time this many more logs were created at run time (`_grew`).
FREEZE_AFTER_LOGS = 1_000


def _make_dir(path: Path) -> bool:
    """Make a partition's dir; False if it was there already (left by a crash, or a
    log whose open failed), so that its contents are read rather than assumed empty."""
    try:
        os.mkdir(path)
    except FileExistsError:
        return False
    except FileNotFoundError:  # the log dir itself went missing: made again, as before
        path.mkdir(parents=True, exist_ok=True)
        return False
    return True


class LogManager(LogDeletions):
    def __init__(
        self,
        log_dirs: Sequence[Path | str],
        *,
        node_id: int,
        cluster_id: str,
        config: LogConfig | Callable[[str], LogConfig] = _DEFAULT_CONFIG,
        recovery_threads_per_dir: int = 1,
        clock_ms: Callable[[], int] = _now_ms,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        file_delete_delay_ms: int = 60_000,
        cleaner_config: CleanerConfig | None = None,
    ) -> None:
        if not log_dirs:
            raise LogDirError("log.dirs is empty")
        self.log_dirs = [Path(d).resolve() for d in log_dirs]
        if len(set(self.log_dirs)) != len(self.log_dirs):
            raise LogDirError(f"log.dirs lists a directory twice: {log_dirs}")
        self.node_id = node_id
        self.cluster_id = cluster_id
        self._config_for: Callable[[str], LogConfig] = (
            (lambda _topic: config) if isinstance(config, LogConfig) else config
        )
        self.recovery_threads_per_dir = max(1, recovery_threads_per_dir)
        self._clock = clock_ms
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.file_delete_delay_ms = file_delete_delay_ms
        self.directory_ids: dict[Path, str] = {}
        self.had_clean_shutdown: dict[Path, bool] = {}
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of = DirAssignments()
        # partitions created without their fsyncs (create(durable=False)): synced by the
        # next checkpoint, as Kafka flushes a new partition's metadata file with the log
        self._unsynced: set[Path] = set()
        self._created_since_freeze = 0
        self._to_delete: list[tuple[Path, int]] = []  # (renamed dir, remove after ms)
        # deleted, not yet closed and renamed (delete_in_steps); dirs renamed in, not synced
        self._detached: dict[TopicPartition, tuple[Log, Path]] = {}
        self._deleted_unsynced: set[Path] = set()
        self.offline_dirs: dict[Path, str] = {}  # failed dir → the error that took it down
        self._failure_lock = threading.Lock()
        self.on_dir_offline: Callable[[Path, str], None] | None = None
        # partitions this broker hosts whose log could not be created: why (offline)
        self.unopened: dict[TopicPartition, str] = {}
        # flush.messages fsyncs, off the event loop (set by the broker; None: inline)
        self.flusher: Executor | None = None
        self.descriptor_warnings = ExhaustionWarnings()
        self.cleaner_config = cleaner_config or CleanerConfig()
        self.cleaner_manager = LogCleanerManager([], self._log_items, clock_ms)
        self.cleaner: LogCleaner | None = None
        self.moves: dict[TopicPartition, PartitionMove] = {}
        self.on_log_moved: Callable[[TopicPartition, Log], None] | None = None
        self.started = False
        self._aborting = threading.Event()
        # the flush timer's work list (Log.on_append); `.deleted` segments are purged by
        # a walk of every log once per half file.delete.delay.ms (at most 30 s)
        self._unflushed: set[Log] = set()
        self._next_purge_walk = 0
        self._checkpoints = DirCheckpoints()
        self._checkpoint_soon: set[Path] = set()  # dirs with deletions not checkpointed

    # -------------------------------------------------------------- startup

    def abort_startup(self) -> None:
        """Stop a `startup()` running in another thread: it closes what it opened
        (writing nothing) and raises StartupAborted within one partition's load."""
        self._aborting.set()

    def startup(self) -> None:
        # What loading allocates lives as long as the broker: without the cyclic
        # collector walking the growing heap again and again (a third of the logs'
        # loading CPU at 20,000 partitions); it runs again once they are loaded.
        gc_was_on = gc.isenabled()
        gc.disable()
        try:
            self._startup()
        except StartupAborted:
            for lg in self._logs.values():
                lg.close_without_flush()  # as loaded: a clean-shutdown marker stays
            self._logs.clear()
            raise
        finally:
            if gc_was_on:
                if len(self._logs) >= FREEZE_AFTER_LOGS:
                    # a first collection over all of it took seconds at 20,000 logs;
                    # they stay for the broker's life, so they leave the collector's
                    # sight (a deleted one's cycles are kept: bounded by this heap)
                    gc.freeze()
                gc.enable()

    def _startup(self) -> None:
        for directory in self.log_dirs:
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                self._dir_failed(directory, exc)
        self.directory_ids.update(check_meta_properties(
            self.online_dirs, self.node_id, self.cluster_id, self._dir_failed))
        for directory in self.online_dirs:
            try:
                self._load_dir(directory)
            except OSError as exc:
                for tp in [tp for tp, d in self._dir_of.items() if d == directory]:
                    lg = self._logs.pop(tp, None)
                    if lg is not None:
                        lg.close_without_flush()
                    del self._dir_of[tp]
                self._dir_failed(directory, exc)
        if not self.online_dirs:
            raise LogDirError(f"every log dir is offline: {self.offline_dirs}")
        self.cleaner_manager = LogCleanerManager(self.online_dirs, self._log_items, self._clock)
        self.started = True

    def _load_dir(self, directory: Path) -> None:
        def open_partition(tp: TopicPartition, path: Path, recovery_point: int,
                           log_start: int, clean: bool) -> Log:
            return self.open_log(path, self._config_for(tp[0]), recovery_point=recovery_point,
                                 log_start_offset=log_start, clean_shutdown=clean,
                                 must_exist=True)

        self.had_clean_shutdown[directory] = load_dir(
            directory, open_partition, assigned=self._dir_of, into=self._logs,
            threads=self.recovery_threads_per_dir, aborting=self._aborting)

    # -------------------------------------------------------------- partitions

    def get(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get((topic, partition))

    def _log_items(self) -> list[tuple[TopicPartition, Log]]:
        # A copy: the cleaner's threads call this while the owner thread adds logs.
        return list(self._logs.copy().items())

    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def _partition_counts(self) -> dict[Path, int]:
        return {d: self._dir_of.counts.get(d, 0) for d in self.online_dirs}

    # -------------------------------------------------------------- failed dirs

    def open_log(self, path: Path, config: LogConfig, *, recovery_point: int = 0,
                 log_start_offset: int = 0, clean_shutdown: bool = False,
                 must_exist: bool = False, new: bool = False) -> Log:
        """Open a partition dir with this manager's clock, and watch it for I/O errors.
        `new`: the dir was just made and is empty (see `create`)."""
        lg = Log.open(
            path, config, recovery_point=recovery_point, log_start_offset=log_start_offset,
            clean_shutdown=clean_shutdown, clock_ms=self._clock,
            producer_id_expiration_ms=self.producer_id_expiration_ms, must_exist=must_exist,
            new=new,
        )  # fmt: skip
        lg.on_io_error = self._on_io_error
        lg.on_append = self._note_append
        lg.flushes.executor = self.flusher
        self._unflushed.add(lg)  # recovered logs may hold unflushed data or a rolled segment
        return lg

    def _note_append(self, lg: Log) -> None:
        self._unflushed.add(lg)  # the set of the moment: flush_due swaps it

    def _on_io_error(self, lg: Log, exc: OSError) -> None:
        directory = self._dir_of.get((lg.topic, lg.partition), lg.directory.parent)
        self._dir_failed(directory, exc)

    def _dir_failed(self, directory: Path, exc: BaseException) -> None:
        """Take a log dir offline: its logs refuse everything from now on. Called from
        whichever thread met the error (a flush runs in a worker thread)."""
        with self._failure_lock:
            if directory in self.offline_dirs:
                return
            reason = f"{type(exc).__name__}: {exc}"
            self.offline_dirs[directory] = reason
        if is_exhausted(exc):
            self.descriptor_warnings.refused("log dirs taken offline", exc)  # type: ignore[arg-type]
        gone = [tp for tp, d in self._dir_of.copy().items() if d == directory]
        for tp in gone:
            lg = self._logs.get(tp)
            if lg is not None:
                lg.mark_offline()
            self.cleaner_manager.abort(tp)
        log.error(
            "log dir %s is offline (%s): its %d partition(s) are offline until it is "
            "repaired and the broker restarted; the other %d dir(s) carry on",
            directory, reason, len(gone), len(self.online_dirs),
        )  # fmt: skip
        if self.on_dir_offline is not None:
            self.on_dir_offline(directory, reason)

    def partitions_in(self, directory: Path) -> list[TopicPartition]:
        return [tp for tp, d in self._dir_of.copy().items() if d == directory]

    def close_offline_handles(self, directory: Path) -> None:
        """Close the files of a failed dir's logs, so that they do not hold descriptors
        (or a dying disk) for ever. Called on the thread that reads the logs: a read
        in flight elsewhere could otherwise be handed a reused descriptor."""
        for tp, d in list(self._dir_of.items()):
            lg = self._logs.get(tp)
            if d == directory and lg is not None and not lg.closed:
                lg.close_without_flush()

    def create(
        self,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        topic_id: str | None = None,
        *,
        durable: bool = True,
    ) -> Log:
        """The partition's log, created in the dir holding the fewest partitions.

        `durable=False` skips the fsyncs of `partition.metadata` and of the dirs (three
        per partition: thousands of partitions took seconds each); `sync_created()`
        makes them durable later, at the latest with the next checkpoint. A crash
        before that loses nothing: the metadata store is the source of truth, and the
        broker recreates what is missing at start-up."""
        existing = self._logs.get((topic, partition))
        if existing is not None:
            return existing
        self._finish_detached((topic, partition))  # its old dir must be renamed first
        if not _LEGAL_TOPIC.match(topic) or topic in (".", ".."):
            raise InvalidTopic(f"illegal topic name {topic!r}")
        if partition < 0:
            raise ValueError(f"negative partition {partition}")
        counts = self._partition_counts()
        if not counts:
            self.unopened[(topic, partition)] = "every log dir is offline"
            raise KafkaStorageError(f"no online log dir for {topic}-{partition}: "
                                    f"{self.offline_dirs}")
        directory = min(counts, key=lambda d: (counts[d], self.log_dirs.index(d)))
        path = directory / f"{topic}-{partition}"
        try:
            new = _make_dir(path)
            if topic_id is not None:
                write_partition_metadata(path, topic_id, sync=durable, new=new)
            if durable:
                fsync_dir(directory)
            else:
                self._unsynced.add(path)
            created = self.open_log(path, config or self._config_for(topic), new=new)
        except OSError as exc:
            if is_exhausted(exc):
                # not the disk's fault: this partition stays offline, the dir serves on
                self.descriptor_warnings.refused("partition opens", exc)
                self.unopened[(topic, partition)] = f"out of file descriptors: {exc}"
            else:
                self._dir_failed(directory, exc)
            raise KafkaStorageError(f"creating {topic}-{partition} in {directory} failed: "
                                    f"{exc}") from exc
        self.unopened.pop((topic, partition), None)
        self._logs[(topic, partition)] = created
        self._dir_of[(topic, partition)] = directory
        self._grew()
        return created

    def _grew(self) -> None:
        """A log (and the partition around it) lives as long as the broker: once
        FREEZE_AFTER_LOGS more were created since the heap was last frozen, it is frozen
        again, so the collector's full passes stop walking them. With 10,000
        partitions created at run time each full pass held the event loop 200 to 800 ms,
        every few seconds while they were created and every ~25 s after (an acks=all
        p99 of 400 ms)."""
        self._created_since_freeze += 1
        if self._created_since_freeze >= FREEZE_AFTER_LOGS and gc.isenabled():
            self._created_since_freeze = 0
            gc.collect(1)  # the young cycles first: once frozen they would never be freed
            gc.freeze()

    def sync_created(self) -> None:
        """fsync what `create(durable=False)` left unsynced."""
        pending, self._unsynced = self._unsynced, set()
        retry, exhausted = sync_new(pending, self.offline_dirs, self._dir_failed)
        if exhausted is not None:
            self.descriptor_warnings.refused("partition syncs", exhausted)
            self._unsynced |= retry

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """DeleteRecords: move the log start to `offset` (-1: the high watermark) and
        return the new low watermark. Segments wholly below it go at once, unless the
        cleaner is busy with the log (then at the next retention check)."""
        lg = self._logs.get((topic, partition))
        if lg is None:
            raise KeyError(f"{topic}-{partition}")
        return delete_records(lg, offset, self.cleaner_manager.in_progress((topic, partition)))

    def start_move(self, topic: str, partition: int, target: Path | str) -> PartitionMove | None:
        """Begin moving a partition to the log dir `target` (AlterReplicaLogDirs). None
        when it is there already; the move in flight when one is."""
        tp = (topic, partition)
        directory = Path(target).resolve()
        if directory not in self.log_dirs:
            raise LogDirNotFound(f"Log dir {target} is not one of this broker's log.dirs")
        if directory in self.offline_dirs:
            raise KafkaStorageError(f"Log directory {target} is offline")
        current = self._dir_of.get(tp)
        if current is None:
            raise KeyError(f"{topic}-{partition}")
        if current in self.offline_dirs:
            raise KafkaStorageError(f"Partition {topic}-{partition} is offline")
        if tp in self.moves:
            return self.moves[tp]
        if current == directory:
            return None
        move = PartitionMove(self, topic, partition, directory)
        self.moves[tp] = move
        return move

    def move_ended(self, move: PartitionMove) -> None:
        if self.moves.get(move.tp) is move:
            del self.moves[move.tp]

    def adopt_moved_log(self, tp: TopicPartition, lg: Log, directory: Path,
                        old_path: Path | None) -> None:
        """A move's last step: the new log replaces the old; the old dir is retired."""
        self._logs[tp] = lg
        self._dir_of[tp] = directory
        if old_path is not None:
            retired = old_path.parent / f"{old_path.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
            try:
                os.replace(old_path, retired)
                fsync_dir(old_path.parent)
            except OSError as exc:
                self._dir_failed(old_path.parent, exc)
            else:
                self._to_delete.append((retired, self._clock() + self.file_delete_delay_ms))
            self.checkpoint()
        if self.on_log_moved is not None:
            self.on_log_moved(tp, lg)

    # -------------------------------------------------------------- periodic work

    def _logs_in(self, directory: Path) -> Iterable[tuple[TopicPartition, Log]]:
        # Copies: checkpoints and flushes run in worker threads while the loop adds logs.
        dirs = self._dir_of.copy()
        return [(tp, lg) for tp, lg in self._logs.copy().items() if dirs.get(tp) == directory]

    def _checkpoint_dir(self, directory: Path) -> None:
        self._checkpoints.write(directory, self._logs_in(directory))

    def checkpoint_high_watermarks(self) -> None:
        """Write `replication-offset-checkpoint` of every dir (replica.high.watermark.
        checkpoint.interval.ms) where a watermark moved; a restarted follower exposes
        nothing above it."""
        for directory in self.online_dirs:
            try:
                self._checkpoints.write_high_watermarks(directory, self._logs_in(directory))
            except OSError as exc:
                self._dir_failed(directory, exc)

    def checkpoint(self) -> None:
        """Write recovery points, log start offsets and high watermarks of every dir."""
        self.sync_created()
        for directory in self.online_dirs:
            try:
                self._checkpoint_dir(directory)
            except OSError as exc:
                self._dir_failed(directory, exc)

    def flush_due(self) -> int:
        """The flush timer: segments rolled since their last flush, and logs whose
        `flush.ms` is reached; then the checkpoints owed by deletions. Blocking (fsync):
        run it in a thread. Returns how many logs were flushed. Only logs appended to
        since they were last found flushed are visited (a walk of every log each second
        was an idle broker's CPU at 20,000 partitions)."""
        flushed = 0
        now = self._clock()
        # swapped, not copied: appends on the loop go to the new set meanwhile
        pending, self._unflushed = self._unflushed, set()
        for lg in pending:
            target = lg.flush_target(now)
            if target is not None:
                try:
                    # Kafka flushes a segment as soon as it is rolled (asynchronously).
                    lg.flush(target)
                    flushed += 1
                except KafkaStorageError:
                    continue  # its dir is offline now (logged there); flush the others
            if (lg.config.flush_ms < LONG_MAX and not lg.closed and not lg.offline
                    and lg.recovery_point < lg.log_end_offset):
                self._unflushed.add(lg)  # flush.ms not reached yet: look again next tick
            # else nothing is due until the next append (which may roll a segment)
        if now >= self._next_purge_walk:
            self._next_purge_walk = now + min(self.file_delete_delay_ms // 2, 30_000)
            for lg in self.all_logs():
                lg.purge_deleted_segments(now)
                if lg.config.flush_ms < LONG_MAX and lg.recovery_point < lg.log_end_offset:
                    self._unflushed.add(lg)  # flush.ms set on a log idle since
        self._purge_deleted_dirs(now)
        dirs, self._checkpoint_soon = self._checkpoint_soon, set()
        for directory in dirs:
            if directory not in self.offline_dirs:
                try:
                    self._checkpoint_dir(directory)
                except OSError as exc:
                    self._dir_failed(directory, exc)
        return flushed

    def remove_expired_producers(self) -> int:
        """`producer.id.expiration.check.interval.ms` timer."""
        return sum(lg.remove_expired_producers() for lg in self.all_logs())

    def cleanup_logs(self, now_ms: int | None = None) -> int:
        """The `log.retention.check.interval.ms` timer: retention for every log (see
        retention.py), on the owner thread. A log the cleaner is busy with waits for
        the next check. Returns the number of segments deleted."""
        now = self._clock() if now_ms is None else now_ms
        total = 0
        for tp, lg in self._log_items():
            if lg.closed or lg.offline or self.cleaner_manager.in_progress(tp):
                continue
            try:
                total += delete_old_segments(lg, now)
            except KafkaError as exc:
                log.warning("retention of %s-%d failed: %s", tp[0], tp[1], exc)
        return total

    def start_cleaner(self, owner: Owner | None = None) -> None:
        """Start `log.cleaner.threads` cleaner threads; `owner` runs a function on the
        logs' owner thread (the broker's event loop) and returns its result."""
        if self.cleaner is not None or not self.cleaner_config.enable:
            return
        self.cleaner = LogCleaner(
            self.cleaner_config, self.cleaner_manager, owner=owner or (lambda fn: fn()),
            clock=self._clock,
        )  # fmt: skip
        self.cleaner.startup()

    def stop_cleaner(self) -> None:
        """Stop the cleaner threads. Not on the owner thread while they may need it."""
        if self.cleaner is not None:
            self.cleaner.shutdown()
            self.cleaner = None
        self.cleaner_manager.stopping = True

    def dir_usage(self) -> list[LogDirUsage]:
        """Per log dir: disk totals and each partition's size (DescribeLogDirs)."""
        result = []
        for directory in self.log_dirs:
            if directory not in self.offline_dirs:
                try:
                    disk = shutil.disk_usage(directory)
                except OSError as exc:
                    self._dir_failed(directory, exc)
                else:
                    sizes = {tp: lg.size_in_bytes for tp, lg in self._logs_in(directory)}
                    future = {tp: m.copied for tp, m in self.moves.items()
                              if m.target_dir == directory and not m.done}
                    result.append(LogDirUsage(directory, disk.total, disk.free, sizes,
                                              future_partitions=future))
                    continue
            # Kafka reports -1 (unknown) for the volume of an offline dir.
            result.append(LogDirUsage(directory, -1, -1, {}, offline=True,
                                      error=self.offline_dirs[directory]))
        return result

    # -------------------------------------------------------------- shutdown

    def shutdown(self, broker_epoch: int = -1) -> None:
        """Stop the cleaner, flush and close every log, checkpoint, then mark each dir
        cleanly shut down — each online dir: a failed one is left for recovery."""
        self.stop_cleaner()
        if self.flusher is not None:
            self.flusher.shutdown(wait=True)  # the queued flushes first: they were owed
        for tp in list(self._detached):  # a delete the stop interrupted
            self._finish_detached(tp)
        self.sync_deleted()
        self.sync_created()
        by_dir: dict[Path, list[Log]] = {d: [] for d in self.log_dirs}
        for tp, lg in self._logs.items():
            by_dir[self._dir_of[tp]].append(lg)
        for directory, logs in by_dir.items():
            if directory in self.offline_dirs:
                for lg in logs:
                    lg.close_without_flush()
                continue
            try:
                with ThreadPoolExecutor(self.recovery_threads_per_dir) as pool:
                    list(pool.map(Log.close, logs))
                if directory in self.offline_dirs:
                    continue  # failed while closing
                self._checkpoint_dir(directory)
                payload = {"version": "0", "broker_epoch": str(broker_epoch)}
                write_atomically(directory / CLEAN_SHUTDOWN_FILE, json.dumps(payload).encode())
            except (OSError, KafkaError) as exc:
                log.error("log dir %s did not shut down cleanly: %s", directory, exc)
                for lg in logs:
                    lg.close_without_flush()
        self.started = False
