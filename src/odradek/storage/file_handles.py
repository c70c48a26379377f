"""A bound on the segment and index files a broker keeps open (issue 12).

Kafka keeps a descriptor open for every segment and maps every index, and asks its
operators for a large `ulimit -n`. With thousands of partitions per broker that limit
is the first thing a new user hits: 5,000 partitions under the common default of 1,024
crashed the broker. Here each `.log` and index file is a `PooledFile`: it is opened on
first use, and the process-wide `FileHandles` closes the least recently used ones when
more than its budget are open. A file in use (between `__enter__` and `__exit__`) is
never closed under its user, and all opening and closing happens under one lock, so a
descriptor number is never reused while a reader still holds it.

The budget is half the soft `RLIMIT_NOFILE` at import (the other half is for sockets,
ZooKeeper and the rest); `FileHandles.configure` changes it.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import threading
from collections import OrderedDict
from pathlib import Path
from types import TracebackType

log = logging.getLogger(__name__)

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
MIN_BUDGET = 16


def read_small_file(path: Path | str) -> bytes:
    """A whole small file in three system calls (open, read, close), without Python's
    file object: a restart reads a few per partition, thousands of partitions over.
    FileNotFoundError if it is absent."""
    fd = os.open(path, os.O_RDONLY | _O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def pread_file(path: Path | str, size: int, position: int) -> bytes:
    """`size` bytes at `position` of a file opened and closed for them."""
    fd = os.open(path, os.O_RDONLY | _O_CLOEXEC)
    try:
        return os.pread(fd, size, position)
    finally:
        os.close(fd)


def open_files_limit() -> int | None:
    """The soft RLIMIT_NOFILE (None: unlimited)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def default_budget() -> int:
    soft = open_files_limit()
    return 1 << 20 if soft is None else max(MIN_BUDGET, soft // 2)


# A partition's active segment: its .log, .index and .timeindex.
FILES_PER_PARTITION = 3
# What a broker needs besides segment files: sockets, ZooKeeper, checkpoints, Python.
OTHER_FILES = 1024


def files_needed(partitions: int) -> int:
    """The open-files limit under which no segment file of an active segment is ever
    closed for want of descriptors: twice the budget, as the budget is half the limit."""
    return max(2 * FILES_PER_PARTITION * partitions, FILES_PER_PARTITION * partitions
               + OTHER_FILES)


class FileHandles:
    """The open `PooledFile`s, least recently used first."""

    def __init__(self, budget: int) -> None:
        self.budget = max(MIN_BUDGET, budget)
        self._open: OrderedDict[PooledFile, None] = OrderedDict()
        self._lock = threading.Lock()
        self.opened = 0  # descriptors opened since start (tests and the bench read it)
        self.evicted = 0
        self.warned = False  # the one line saying what to raise has been logged

    def configure(self, budget: int) -> None:
        with self._lock:
            self.budget = max(MIN_BUDGET, budget)
            self._evict()

    @property
    def open_count(self) -> int:
        return len(self._open)

    def _lease(self, f: PooledFile) -> int:
        with self._lock:
            if f.fd < 0:
                if f.closed:  # as a read of a closed descriptor fails
                    raise OSError(errno.EBADF, f"{f.path} is closed")
                f.fd = os.open(f.path, f.flags, 0o644)
                self.opened += 1
                self._open[f] = None
                self._evict()
            else:
                self._open.move_to_end(f)
            f.users += 1
            return f.fd

    def _release(self, f: PooledFile) -> None:
        with self._lock:
            f.users -= 1

    def _evict(self) -> None:
        """Close the least recently used idle files until the budget holds (lock held).
        Walks from the oldest and stops as soon as enough are found: a copy of the
        whole list per open made loading 20,000 partitions quadratic."""
        excess = len(self._open) - self.budget
        if excess <= 0:
            return
        victims: list[PooledFile] = []
        for f in self._open:
            if not f.users:
                victims.append(f)
                if len(victims) == excess:
                    break
        if victims and not self.warned:
            self.warned = True
            log.warning(
                "more than %d segment and index files in use: the least recently used "
                "are closed and reopened on demand; raise the open-files limit (ulimit -n, "
                "systemd LimitNOFILE; now %s) to keep them open",
                self.budget, open_files_limit())
        for f in victims:
            del self._open[f]
            fd, f.fd = f.fd, -1
            os.close(fd)
        self.evicted += len(victims)

    def _close(self, f: PooledFile) -> None:
        with self._lock:
            f.closed = True
            if f.fd >= 0:
                self._open.pop(f, None)
                fd, f.fd = f.fd, -1
                os.close(fd)

    def _drop(self, f: PooledFile) -> None:
        """Close the descriptor but keep the file usable (it reopens on next use)."""
        with self._lock:
            if f.fd >= 0 and not f.users:
                self._open.pop(f, None)
                fd, f.fd = f.fd, -1
                os.close(fd)


HANDLES = FileHandles(default_budget())


class PooledFile:
    """One file, opened on demand: `with f as fd: os.pread(fd, …)`."""

    __slots__ = ("closed", "fd", "flags", "path", "pool", "users")

    def __init__(self, path: Path, flags: int, *, create: bool = False,
                 pool: FileHandles | None = None) -> None:
        self.path = path
        self.flags = flags | _O_CLOEXEC
        self.pool = pool if pool is not None else HANDLES
        self.fd = -1
        self.users = 0
        self.closed = False
        if create:
            # Created now (the file must exist even if never written), closed at once.
            os.close(os.open(path, flags | os.O_CREAT | _O_CLOEXEC, 0o644))

    def __enter__(self) -> int:
        return self.pool._lease(self)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.pool._release(self)

    def close(self) -> None:
        """For good: a later use raises."""
        self.pool._close(self)

    def release_descriptor(self) -> None:
        """Close the descriptor now if it is idle (an inactive segment's index)."""
        self.pool._drop(self)

    def rename(self, path: Path) -> None:
        """The file was renamed: later opens use the new name (an open fd follows it)."""
        self.path = path

    def __repr__(self) -> str:
        return f"PooledFile({self.path}, fd={self.fd})"
