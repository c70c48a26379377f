"""Running out of file descriptors: told once in a while, with the limit and the fix.

EMFILE (this process's RLIMIT_NOFILE) and ENFILE (the system's table) are not a disk
failure: a partition that cannot be opened, or a connection that cannot be accepted,
is refused while the rest carries on. The warning names the limit and what to raise,
and is rate-limited because it arrives in bursts (every accept, every open).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import resource
import threading
import time
from collections.abc import Iterator

log = logging.getLogger(__name__)

EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE})
WARN_EVERY_S = 10.0


def is_exhausted(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in EXHAUSTED


def nofile_limits() -> tuple[int, int]:
    """(soft, hard) RLIMIT_NOFILE of this process."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)


class ExhaustionWarnings:
    """Counts what was refused for want of descriptors; logs each kind (connections,
    partition opens…) at its first refusal, then at most every WARN_EVERY_S."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._refused: dict[str, int] = {}
        self.total = 0

    def refused(self, what: str, exc: OSError) -> None:
        now = time.monotonic()
        with self._lock:
            count = self._refused[what] = self._refused.get(what, 0) + 1
            self.total += 1
            last = self._last.get(what)
            if last is not None and now - last < WARN_EVERY_S:
                return
            self._last[what] = now
            self._refused[what] = 0
        soft, hard = nofile_limits()
        scope = ("the system's file table is full (ENFILE): raise fs.file-max"
                 if exc.errno == errno.ENFILE else
                 f"this process's limit is {soft} (hard limit {hard}): raise it with "
                 f"`ulimit -n` or LimitNOFILE= in the service unit (Kafka's docs advise "
                 f"100000)")
        log.error(
            "out of file descriptors (%s): %s; refused since the last message: %s. "
            "Each partition holds about 3 descriptors per segment and each connection one; "
            "existing connections and open partitions carry on",
            errno.errorcode.get(exc.errno or 0, exc.errno), scope, f"{count} {what}",
        )  # fmt: skip


class DescriptorReserve:
    """A few descriptors held back (on /dev/null), let go when the process runs out so
    that what must still happen can: accepting a connection to close it at once, a
    request's first use of a module (Python opens the file to import it)."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self._fds: list[int] = []
        self.refill()

    @property
    def held(self) -> int:
        return len(self._fds)

    def refill(self) -> None:
        while len(self._fds) < self.size:
            try:
                self._fds.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
            except OSError:
                return

    @contextlib.contextmanager
    def released(self) -> Iterator[int]:
        """Free the reserve for the block (yields how many were freed), then take back
        what can be taken."""
        freed = len(self._fds)
        self.close()
        try:
            yield freed
        finally:
            self.refill()

    def close(self) -> None:
        while self._fds:
            os.close(self._fds.pop())
