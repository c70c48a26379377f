"""Deleting partitions: Kafka's asyncDelete. A deleted partition's dir is renamed
`<topic>-<partition>.<uuid>-delete` at once (or in steps the broker runs in slices of
its event loop), and removed after `file.delete.delay.ms`. A part of `LogManager`,
which holds the state it works on."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from odradek.storage.checkpoints import TopicPartition, fsync_dir
from odradek.storage.cleaner_manager import LogCleanerManager
from odradek.storage.log import Log
from odradek.storage.log_dir_scan import DELETE_DIR_SUFFIX, DirAssignments


class LogDeletions:
    """LogManager's deletions; the attributes below are the manager's."""

    _logs: dict[TopicPartition, Log]
    _dir_of: DirAssignments
    _unsynced: set[Path]
    _to_delete: list[tuple[Path, int]]
    _detached: dict[TopicPartition, tuple[Log, Path]]
    _deleted_unsynced: set[Path]
    _checkpoint_soon: set[Path]
    offline_dirs: dict[Path, str]
    cleaner_manager: LogCleanerManager
    file_delete_delay_ms: int
    _clock: Callable[[], int]

    def _dir_failed(self, directory: Path, exc: BaseException) -> None:
        raise NotImplementedError

    def _checkpoint_dir(self, directory: Path) -> None:
        raise NotImplementedError

    def all_logs(self) -> list[Log]:
        raise NotImplementedError

    def delete_in_steps(self, partitions: Iterable[TopicPartition]) -> Iterator[None]:
        """Delete partitions (Kafka's asyncDelete): each leaves the manager now (a
        re-create of the name gets a new log); closing it and renaming its dir
        `…-delete` is a step of the iterator returned, run by the caller in slices of
        the event loop (renames took 0.5 s for 5,000 partitions). A create of the same
        partition, or the shutdown, does a step not yet run. `sync_deleted()` then
        makes the renames durable, and the next flush tick rewrites the dirs'
        checkpoints once for every deletion since (a stale line is harmless)."""
        detached = []
        for tp in partitions:
            removed = self._logs.pop(tp, None)
            directory = self._dir_of.pop(tp, None)
            if removed is None or directory is None:
                continue
            self._detached[tp] = (removed, directory)
            detached.append(tp)
        return self._deleting(detached)

    def _deleting(self, partitions: list[TopicPartition]) -> Iterator[None]:
        for tp in partitions:
            self._finish_detached(tp)
            yield

    def _finish_detached(self, tp: TopicPartition) -> None:
        entry = self._detached.pop(tp, None)
        if entry is None:
            return
        self.cleaner_manager.remove(tp, entry[1])
        if self._rename_deleted(tp, *entry, checkpoint=False):
            self._deleted_unsynced.add(entry[1])
            self._checkpoint_soon.add(entry[1])

    def sync_deleted(self) -> None:
        """fsync the dirs `delete_in_steps` renamed in (a worker thread's call)."""
        pending, self._deleted_unsynced = self._deleted_unsynced, set()
        for directory in pending:
            try:
                fsync_dir(directory)
            except OSError as exc:
                self._dir_failed(directory, exc)

    def delete(self, topic: str, partition: int, *, checkpoint: bool = True) -> Path | None:
        """Close the log and rename its dir `<topic>-<partition>.<uuid>-delete`;
        `purge_deleted` removes it after `file.delete.delay.ms`. Returns the new path."""
        tp = (topic, partition)
        removed = self._logs.pop(tp, None)
        directory = self._dir_of.pop(tp, None)
        if removed is None or directory is None:
            return None
        self.cleaner_manager.remove(tp, directory)
        return self._rename_deleted(tp, removed, directory, checkpoint=checkpoint)

    def _rename_deleted(self, tp: TopicPartition, removed: Log, directory: Path, *,
                        checkpoint: bool) -> Path | None:
        removed.close_without_flush()
        if directory in self.offline_dirs:
            return None  # nothing can be renamed there; a restart after repair reconciles
        target = directory / f"{tp[0]}-{tp[1]}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        try:
            os.replace(removed.directory, target)
            self._unsynced.discard(removed.directory)
            if checkpoint:
                fsync_dir(directory)
                self._checkpoint_dir(directory)
        except OSError as exc:
            self._dir_failed(directory, exc)
            return None
        self._to_delete.append((target, self._clock() + self.file_delete_delay_ms))
        return target

    def purge_deleted(self, now_ms: int | None = None) -> int:
        now = self._clock() if now_ms is None else now_ms
        for lg in self.all_logs():
            lg.purge_deleted_segments(now)
        return self._purge_deleted_dirs(now)

    def _purge_deleted_dirs(self, now: int) -> int:
        if not self._to_delete:
            return 0
        due = [(p, t) for p, t in self._to_delete if t <= now]
        for path, _ in due:
            shutil.rmtree(path, ignore_errors=True)
        self._to_delete = [(p, t) for p, t in self._to_delete if t > now]
        return len(due)

