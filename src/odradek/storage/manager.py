"""LogManager: the log dirs (`log.dirs`), their checkpoints and the partitions in them.

Startup, per log dir: check or create `meta.properties` (refusing a dir that belongs
to another node or cluster), note Kafka's clean-shutdown marker `.kafka_cleanshutdown`
(present: the files are trusted, no recovery scan), read the recovery-point and
log-start checkpoints, remove directories left by deleted partitions, and open every
`<topic>-<partition>` with `num.recovery.threads.per.data.dir` threads. The marker is
removed once the dir is loaded, so a crash from then on triggers recovery.

Running: `create` places a new partition in the dir holding the fewest, `delete`
renames it to `<topic>-<partition>.<uuid>-delete` and removes it later,
`checkpoint()` writes the root checkpoint files, `flush_due()` is the broker's
`log.flush.scheduler.interval.ms` timer. `shutdown()` flushes and closes every log,
writes the checkpoints and then the clean-shutdown markers.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from odradek.protocol.errors import InvalidTopic
from odradek.storage.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    MetaProperties,
    TopicPartition,
    fsync_dir,
    new_uuid,
    read_meta_properties,
    read_offsets,
    write_atomically,
    write_meta_properties,
    write_offsets,
    write_partition_metadata,
)
from odradek.storage.log import Log, parse_topic_partition
from odradek.storage.log_config import LogConfig
from odradek.storage.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS

log = logging.getLogger(__name__)

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


class LogDirError(Exception):
    """A log dir the broker must not start on: wrong node, wrong cluster, duplicates."""


@dataclass(frozen=True, slots=True)
class LogDirUsage:
    """What DescribeLogDirs reports for one dir."""

    path: Path
    total_bytes: int
    usable_bytes: int
    partitions: dict[TopicPartition, int] = field(default_factory=dict)  # size in bytes


_DEFAULT_CONFIG = LogConfig()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class LogManager:
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
        self._dir_of: dict[TopicPartition, Path] = {}
        self._to_delete: list[tuple[Path, int]] = []  # (renamed dir, remove after ms)
        self.started = False

    # -------------------------------------------------------------- startup

    def startup(self) -> None:
        for directory in self.log_dirs:
            directory.mkdir(parents=True, exist_ok=True)
        self._check_meta_properties()
        for directory in self.log_dirs:
            self._load_dir(directory)
        self.started = True

    def _check_meta_properties(self) -> None:
        seen_ids: dict[str, Path] = {}
        for directory in self.log_dirs:
            path = directory / META_PROPERTIES
            meta = read_meta_properties(path)
            if meta is None:
                meta = MetaProperties(1, self.cluster_id, self.node_id, new_uuid())
                write_meta_properties(path, meta)
                log.info("wrote %s for node %d of cluster %s", path, self.node_id, self.cluster_id)
            if meta.node_id is not None and meta.node_id != self.node_id:
                raise LogDirError(
                    f"{path} belongs to node {meta.node_id}, but this broker is node "
                    f"{self.node_id}: the dir holds another broker's data (check node.id "
                    f"and log.dirs)"
                )
            if meta.cluster_id is not None and meta.cluster_id != self.cluster_id:
                raise LogDirError(
                    f"{path} belongs to cluster {meta.cluster_id}, but this broker is in "
                    f"cluster {self.cluster_id}: refusing to mix the two clusters' data"
                )
            if meta.directory_id is not None:
                if meta.directory_id in seen_ids:
                    raise LogDirError(
                        f"{directory} and {seen_ids[meta.directory_id]} have the same "
                        f"directory.id {meta.directory_id}: one was copied from the other"
                    )
                seen_ids[meta.directory_id] = directory
                self.directory_ids[directory] = meta.directory_id

    def _load_dir(self, directory: Path) -> None:
        marker = directory / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self.had_clean_shutdown[directory] = clean
        recovery_points = read_offsets(directory / RECOVERY_POINT_CHECKPOINT)
        log_starts = read_offsets(directory / LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = read_offsets(directory / REPLICATION_OFFSET_CHECKPOINT)
        jobs: list[tuple[TopicPartition, Path]] = []
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            name = entry.name
            if name.endswith(DELETE_DIR_SUFFIX):
                log.info("removing %s, a deleted partition", entry.path)
                shutil.rmtree(entry.path, ignore_errors=True)
                continue
            if name.endswith((FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
                log.warning("leaving %s alone: future and stray replicas are not loaded", name)
                continue
            try:
                tp = parse_topic_partition(name)
            except ValueError:
                log.warning("skipping %s in %s: not a partition directory", name, directory)
                continue
            if tp in self._dir_of:
                raise LogDirError(
                    f"partition {tp[0]}-{tp[1]} is in both {self._dir_of[tp]} and {directory}"
                )
            self._dir_of[tp] = directory
            jobs.append((tp, Path(entry.path)))

        def load(job: tuple[TopicPartition, Path]) -> tuple[TopicPartition, Log]:
            tp, path = job
            return tp, Log.open(
                path,
                self._config_for(tp[0]),
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=log_starts.get(tp, 0),
                clean_shutdown=clean,
                clock_ms=self._clock,
                producer_id_expiration_ms=self.producer_id_expiration_ms,
            )

        started = time.monotonic()
        with ThreadPoolExecutor(self.recovery_threads_per_dir) as pool:
            for tp, opened in pool.map(load, jobs):
                opened.high_watermark = high_watermarks.get(tp, opened.log_start_offset)
                self._logs[tp] = opened
        log.info(
            "loaded %d partitions from %s in %.2fs (%s shutdown)",
            len(jobs), directory, time.monotonic() - started, "clean" if clean else "unclean",
        )
        if clean:
            marker.unlink()
            fsync_dir(directory)

    # -------------------------------------------------------------- partitions

    def get(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get((topic, partition))

    def _partition_counts(self) -> dict[Path, int]:
        counts = dict.fromkeys(self.log_dirs, 0)
        for directory in self._dir_of.values():
            counts[directory] += 1
        return counts

    def create(
        self,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        topic_id: str | None = None,
    ) -> Log:
        """The partition's log, created in the dir holding the fewest partitions."""
        existing = self._logs.get((topic, partition))
        if existing is not None:
            return existing
        if not _LEGAL_TOPIC.match(topic) or topic in (".", ".."):
            raise InvalidTopic(f"illegal topic name {topic!r}")
        if partition < 0:
            raise ValueError(f"negative partition {partition}")
        counts = self._partition_counts()
        directory = min(self.log_dirs, key=lambda d: (counts[d], self.log_dirs.index(d)))
        path = directory / f"{topic}-{partition}"
        path.mkdir(parents=True, exist_ok=True)
        if topic_id is not None:
            write_partition_metadata(path, topic_id)
        fsync_dir(directory)
        created = Log.open(
            path,
            config or self._config_for(topic),
            clock_ms=self._clock,
            producer_id_expiration_ms=self.producer_id_expiration_ms,
        )
        self._logs[(topic, partition)] = created
        self._dir_of[(topic, partition)] = directory
        return created

    def delete(self, topic: str, partition: int) -> Path | None:
        """Close the log and rename its dir `<topic>-<partition>.<uuid>-delete`;
        `purge_deleted` removes it after `file.delete.delay.ms`. Returns the new path."""
        tp = (topic, partition)
        removed = self._logs.pop(tp, None)
        directory = self._dir_of.pop(tp, None)
        if removed is None or directory is None:
            return None
        removed.close_without_flush()
        target = directory / f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        os.replace(removed.directory, target)
        fsync_dir(directory)
        self._to_delete.append((target, self._clock() + self.file_delete_delay_ms))
        self._checkpoint_dir(directory)
        return target

    def purge_deleted(self, now_ms: int | None = None) -> int:
        now = self._clock() if now_ms is None else now_ms
        due = [(p, t) for p, t in self._to_delete if t <= now]
        for path, _ in due:
            shutil.rmtree(path, ignore_errors=True)
        self._to_delete = [(p, t) for p, t in self._to_delete if t > now]
        return len(due)

    # -------------------------------------------------------------- periodic work

    def _logs_in(self, directory: Path) -> Iterable[tuple[TopicPartition, Log]]:
        return ((tp, lg) for tp, lg in self._logs.items() if self._dir_of.get(tp) == directory)

    def _checkpoint_dir(self, directory: Path) -> None:
        logs = list(self._logs_in(directory))
        write_offsets(
            directory / RECOVERY_POINT_CHECKPOINT, {tp: lg.recovery_point for tp, lg in logs}
        )
        # Like Kafka, only where the log start is above the first segment's base.
        write_offsets(
            directory / LOG_START_OFFSET_CHECKPOINT,
            {
                tp: lg.log_start_offset
                for tp, lg in logs
                if lg.log_start_offset > lg.segments[0].base_offset
            },
        )
        write_offsets(
            directory / REPLICATION_OFFSET_CHECKPOINT, {tp: lg.high_watermark for tp, lg in logs}
        )

    def checkpoint(self) -> None:
        """Write recovery points, log start offsets and high watermarks of every dir."""
        for directory in self.log_dirs:
            self._checkpoint_dir(directory)

    def flush_due(self) -> int:
        """The flush timer: segments rolled since their last flush, and logs whose
        `flush.messages` / `flush.ms` is reached. Blocking (fsync): run it in a thread.
        Returns how many logs were flushed."""
        flushed = 0
        for lg in self.all_logs():
            if lg.closed:
                continue
            active_base = lg.active_segment.base_offset
            if lg.recovery_point < active_base:
                # Kafka flushes a segment as soon as it is rolled (asynchronously).
                lg.flush(active_base)
                flushed += 1
            elif lg.maybe_flush():
                flushed += 1
        self.purge_deleted()
        return flushed

    def remove_expired_producers(self) -> int:
        """`producer.id.expiration.check.interval.ms` timer."""
        return sum(lg.remove_expired_producers() for lg in self.all_logs())

    def dir_usage(self) -> list[LogDirUsage]:
        """Per log dir: disk totals and each partition's size (DescribeLogDirs)."""
        result = []
        for directory in self.log_dirs:
            disk = shutil.disk_usage(directory)
            sizes = {tp: lg.size_in_bytes for tp, lg in self._logs_in(directory)}
            result.append(LogDirUsage(directory, disk.total, disk.free, sizes))
        return result

    # -------------------------------------------------------------- shutdown

    def shutdown(self, broker_epoch: int = -1) -> None:
        """Flush and close every log, checkpoint, then mark each dir cleanly shut down."""
        by_dir: dict[Path, list[Log]] = {d: [] for d in self.log_dirs}
        for tp, lg in self._logs.items():
            by_dir[self._dir_of[tp]].append(lg)
        for directory, logs in by_dir.items():
            with ThreadPoolExecutor(self.recovery_threads_per_dir) as pool:
                list(pool.map(Log.close, logs))
            self._checkpoint_dir(directory)
            payload = {"version": "0", "broker_epoch": str(broker_epoch)}
            write_atomically(directory / CLEAN_SHUTDOWN_FILE, json.dumps(payload).encode())
        self.started = False
