"""`flush.messages` off the event loop, one fsync for every append waiting on it.

Kafka flushes in the append path when a log holds `flush.messages` unflushed records,
and the produce is acknowledged after it. Here the append runs on the event loop, so
the fsync is queued to a flusher thread instead and the produce handler awaits it
before answering. At most one flush per log waits to start; every append made before
it starts is covered by it (it flushes to the log end it finds), so concurrent
producers share fsyncs: a flush per batch at most, never per record.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future


class FlushQueue:
    """The flush waiting to start for one log, if any."""

    def __init__(self, executor: Executor | None = None) -> None:
        self.executor = executor
        self._lock = threading.Lock()
        self._queued: Future[None] | None = None

    @property
    def pending(self) -> Future[None] | None:
        """The flush that will cover everything appended so far, if one is queued."""
        return self._queued

    def request(self, flush: Callable[[], None]) -> Future[None]:
        assert self.executor is not None
        with self._lock:
            if self._queued is None:
                self._queued = self.executor.submit(self._run, flush)
            return self._queued

    def _run(self, flush: Callable[[], None]) -> None:
        with self._lock:
            # appends from now on need another flush: this one may start before them
            self._queued = None
        flush()
