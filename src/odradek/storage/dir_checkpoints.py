"""What a log dir's root files record of its partitions, and the fsyncs that make new
partitions durable.

The checkpoints (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
`replication-offset-checkpoint`) are written whole, as Kafka writes them; the
high-watermark timer's rewrite is skipped when no watermark moved since this process
last wrote the file (an idle broker's timer rewrote and fsynced every partition's).
New partitions are created without fsyncs and synced here in one pass (`sync_new`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Container, Iterable
from pathlib import Path

from odradek.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    TopicPartition,
    fsync_dir,
    fsync_file,
    write_offsets,
)
from odradek.storage.descriptors import is_exhausted
from odradek.storage.log import Log


class DirCheckpoints:
    def __init__(self) -> None:
        self._written: dict[Path, dict[TopicPartition, int]] = {}  # high watermarks

    def write(self, directory: Path, logs: Iterable[tuple[TopicPartition, Log]]) -> None:
        """Every checkpoint of the dir."""
        logs = list(logs)
        write_offsets(directory / RECOVERY_POINT_CHECKPOINT,
                      {tp: lg.recovery_point for tp, lg in logs})
        # Like Kafka, only where the log start is above the first segment's base.
        write_offsets(directory / LOG_START_OFFSET_CHECKPOINT,
                      {tp: lg.log_start_offset for tp, lg in logs
                       if lg.log_start_offset > lg.segments[0].base_offset})
        marks = {tp: lg.high_watermark for tp, lg in logs}
        write_offsets(directory / REPLICATION_OFFSET_CHECKPOINT, marks)
        self._written[directory] = marks

    def write_high_watermarks(self, directory: Path,
                              logs: Iterable[tuple[TopicPartition, Log]]) -> None:
        """The dir's high watermarks, if one moved since the last write."""
        marks = {tp: lg.high_watermark for tp, lg in logs}
        if self._written.get(directory) != marks:
            write_offsets(directory / REPLICATION_OFFSET_CHECKPOINT, marks)
            self._written[directory] = marks


def sync_new(paths: Iterable[Path], offline: Container[Path],
             failed: Callable[[Path, OSError], None]) -> tuple[set[Path], OSError | None]:
    """fsync what `LogManager.create(durable=False)` left unsynced: each new
    partition's metadata file and dir, then each parent dir once.

    Running out of file descriptors is not the disk's fault: what could not be synced
    for want of one is returned (with the error) to be synced on the next pass, and its
    dir stays online."""
    parents: dict[Path, Path] = {}
    retry: set[Path] = set()
    exhausted: OSError | None = None
    for path in paths:
        if path.parent in offline or not path.exists():
            continue  # deleted meanwhile, or its dir failed
        try:
            with contextlib.suppress(FileNotFoundError):
                fsync_file(path / PARTITION_METADATA)
            fsync_dir(path)
            parents.setdefault(path.parent, path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            if is_exhausted(exc):
                retry.add(path)
                exhausted = exc
            else:
                failed(path.parent, exc)
    for directory, path in parents.items():
        try:
            fsync_dir(directory)
        except OSError as exc:
            if is_exhausted(exc):
                retry.add(path)  # its pass syncs the dir again
                exhausted = exc
            else:
                failed(directory, exc)
    return retry, exhausted
