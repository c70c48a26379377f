"""Moving a partition to another log dir (AlterReplicaLogDirs), while it keeps serving.

Kafka creates a "future" replica in the target dir and fills it by fetching from the
current one. Here the files are copied instead — a log's files are append-only, so a
copy can be brought up to date by copying what grew:
1. `copy()`, in a worker thread, any number of times: every file of the partition into
   `<target>/<topic>-<partition>.<id>-future`, `.log` files by their new tail, the small
   files whole. Appends go on meanwhile; the cleaner is paused for the partition.
2. `finish()`, on the logs' owner thread: close the log cleanly (so its producer
   snapshot and indexes are final), copy what changed since the last pass, fsync,
   rename the future dir to `<topic>-<partition>`, open it, and retire the old dir
   (`-delete`, removed later). Only this last step stops the partition, for as long as
   copying the data written since the last `copy()` takes.
A crash before the rename leaves a `-future` dir, which the loader ignores (and warns
about); the partition stays where it was.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from odradek.storage.checkpoints import TopicPartition, fsync_dir
from odradek.storage.segment import CLEANED_SUFFIX, DELETED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX

if TYPE_CHECKING:
    from odradek.storage.cleaner_manager import LogCleanerManager
    from odradek.storage.log import Log
    from odradek.storage.log_config import LogConfig

log = logging.getLogger(__name__)

FUTURE_DIR_SUFFIX = "-future"
_SKIP = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, ".tmp")
_CHUNK = 4 * 1024 * 1024


def future_dir(target_dir: Path, name: str) -> Path:
    return target_dir / f"{name}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def _copy_tail(source: str | Path, dest: Path, start: int) -> int:
    copied = 0
    with open(source, "rb") as src, open(dest, "r+b" if dest.exists() else "wb") as out:
        src.seek(start)
        out.seek(start)
        while chunk := src.read(_CHUNK):
            out.write(chunk)
            copied += len(chunk)
        out.truncate()
    return copied


def sync_partition_dir(source: Path, dest: Path, *, fsync: bool = False) -> int:
    """Make `dest` a copy of `source`; returns the bytes copied.

    `.log` files are append-only while the cleaner is paused: only their new tail is
    copied (the whole file if it shrank). Other files are small and copied whole.
    Files gone from `source` (retention deleted them) go from `dest` too.
    """
    dest.mkdir(parents=True, exist_ok=True)
    copied = 0
    wanted = set()
    for entry in os.scandir(source):
        name = entry.name
        if not entry.is_file() or name.endswith(_SKIP):
            continue
        wanted.add(name)
        target = dest / name
        try:
            size = entry.stat().st_size
            if name.endswith(LOG_SUFFIX) and target.exists():
                have = target.stat().st_size
                copied += _copy_tail(entry.path, target, have if have <= size else 0)
            else:
                shutil.copyfile(entry.path, target)
                copied += size
        except FileNotFoundError:
            wanted.discard(name)  # deleted by retention while we copied
            target.unlink(missing_ok=True)
            continue
        if fsync:
            fd = os.open(target, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    for entry in os.scandir(dest):
        if entry.name not in wanted:
            os.unlink(entry.path)
    if fsync:
        fsync_dir(dest)
    return copied


class MoveHost(Protocol):
    """What a move needs of the log manager that owns the partition (kept to this, so
    that the manager depends on moves and not the other way round)."""

    cleaner_manager: LogCleanerManager

    def get(self, topic: str, partition: int) -> Log | None: ...

    def open_log(self, path: Path, config: LogConfig, *, recovery_point: int = 0,
                 log_start_offset: int = 0, clean_shutdown: bool = False,
                 must_exist: bool = False) -> Log: ...

    def adopt_moved_log(self, tp: TopicPartition, lg: Log, directory: Path,
                        old_path: Path | None) -> None: ...


class PartitionMove:
    """One partition on its way to another log dir; see the module docstring."""

    def __init__(self, manager: MoveHost, topic: str, partition: int, target_dir: Path) -> None:
        lg = manager.get(topic, partition)
        if lg is None:
            raise KeyError(f"{topic}-{partition} is not on this broker")
        self.manager = manager
        self.tp = (topic, partition)
        self.log = lg
        self.source_dir = lg.directory.parent
        self.target_dir = target_dir
        self.future = future_dir(target_dir, lg.directory.name)
        self.copied = 0
        self.started = False  # a task is running it
        self.done = False
        self.failed: str | None = None
        manager.cleaner_manager.pause(self.tp)

    def copy(self) -> int:
        """A catch-up pass; thread safe with respect to the running log."""
        n = sync_partition_dir(self.log.directory, self.future)
        self.copied += n
        return n

    def finish(self) -> Log:
        """On the owner thread: the last pass, then the new log replaces the old one."""
        old = self.log
        try:
            if self.manager.get(*self.tp) is not old or old.closed or old.offline:
                raise OSError(f"{self.tp[0]}-{self.tp[1]} changed during its move")
            start, end, hw = old.log_start_offset, old.log_end_offset, old.high_watermark
            old.close()
            sync_partition_dir(old.directory, self.future, fsync=True)
            final = self.target_dir / old.directory.name
            os.replace(self.future, final)
            fsync_dir(self.target_dir)
            moved = self.manager.open_log(final, old.config, recovery_point=end,
                                          log_start_offset=start, clean_shutdown=True)
            moved.high_watermark = hw
        except OSError as exc:
            self.failed = str(exc)
            shutil.rmtree(self.future, ignore_errors=True)
            self.manager.cleaner_manager.resume(self.tp)
            if old.closed and not old.offline and old.directory.exists():
                # Closed for the last pass but not moved: open it again where it was.
                reopened = self.manager.open_log(
                    old.directory, old.config, recovery_point=old.recovery_point,
                    log_start_offset=old.log_start_offset, clean_shutdown=True,
                )  # fmt: skip
                reopened.high_watermark = old.high_watermark
                self.manager.adopt_moved_log(self.tp, reopened, self.source_dir, None)
            raise
        self.manager.adopt_moved_log(self.tp, moved, self.target_dir, old.directory)
        self.manager.cleaner_manager.move_checkpoint(self.tp, self.source_dir, self.target_dir)
        self.manager.cleaner_manager.resume(self.tp)
        self.done = True
        log.info("moved %s-%d from %s to %s", self.tp[0], self.tp[1], self.source_dir,
                 self.target_dir)
        return moved

    def abandon(self) -> None:
        shutil.rmtree(self.future, ignore_errors=True)
        self.manager.cleaner_manager.resume(self.tp)
