"""What a log dir holds at start-up, and opening each partition found there.

`partition_dirs` sorts a log dir's entries: partition directories to load; directories
of deleted partitions and unfinished moves, removed; stray replicas, left alone; and
anything else, skipped with one line saying what to do. `open_found_partition` opens one
of them, leaving out (with one line) a partition whose directory vanished meanwhile.
`DirAssignments` keeps which dir holds each partition, with the count per dir.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from odradek.storage.checkpoints import TopicPartition
from odradek.storage.dir_move import FUTURE_DIR_SUFFIX
from odradek.storage.log import Log, parse_topic_partition

log = logging.getLogger(__name__)

DELETE_DIR_SUFFIX = "-delete"
STRAY_DIR_SUFFIX = "-stray"


class LogDirError(Exception):
    """A log dir the broker must not start on: wrong node, wrong cluster, duplicates."""


class StartupAborted(Exception):
    """`abort_startup()` was called while the logs were loading (SIGTERM at start-up)."""


def partition_dirs(directory: Path) -> list[tuple[TopicPartition, Path]]:
    """The partition directories of a log dir, in name order; leftovers removed."""
    found: list[tuple[TopicPartition, Path]] = []
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if not entry.is_dir():
            continue
        name = entry.name
        if name.endswith(DELETE_DIR_SUFFIX):
            log.info("removing %s, a deleted partition", entry.path)
            shutil.rmtree(entry.path, ignore_errors=True)
            continue
        if name.endswith(FUTURE_DIR_SUFFIX):
            log.warning("removing %s: a move to this dir did not finish", entry.path)
            shutil.rmtree(entry.path, ignore_errors=True)
            continue
        if name.endswith(STRAY_DIR_SUFFIX):
            log.warning("leaving %s alone: stray replicas are not loaded", name)
            continue
        try:
            tp = parse_topic_partition(name)
        except ValueError:
            log.warning("skipping %s in %s: not a partition directory (<topic>-<partition>); "
                        "move it out of the log dir to silence this", name, directory)
            continue
        found.append((tp, Path(entry.path)))
    return found


def open_found_partition(path: Path, open_log: Callable[[], Log]) -> Log | None:
    """`open_log()` (which must not create the dir); None, with one line, if the
    directory is gone. A file vanishing inside a dir that is still there is retried
    once (its listing is then fresh), then raised: the dir is not trustworthy."""
    for attempt in (1, 2):
        try:
            return open_log()
        except FileNotFoundError:
            if not path.exists():
                log.warning(
                    "partition directory %s vanished while the broker was loading it "
                    "(removed by another program?): left out; the broker recreates it "
                    "empty if the partition is still assigned here", path)
                return None
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


class DirAssignments(dict[TopicPartition, Path]):
    """Which dir holds each partition, with the count per dir kept up to date: placing
    a new partition must not count every partition (quadratic over a CreateTopics of
    thousands)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[Path, int] = {}

    def __setitem__(self, tp: TopicPartition, directory: Path) -> None:
        old = self.get(tp)
        if old is not None:
            self.counts[old] -= 1
        super().__setitem__(tp, directory)
        self.counts[directory] = self.counts.get(directory, 0) + 1

    def __delitem__(self, tp: TopicPartition) -> None:
        self.counts[self[tp]] -= 1
        super().__delitem__(tp)

    def pop(self, tp: TopicPartition, default: Path | None = None) -> Path | None:  # type: ignore[override]
        if tp not in self:
            return default
        directory = self[tp]
        del self[tp]
        return directory
