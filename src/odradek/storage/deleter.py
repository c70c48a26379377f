"""Segments on their way out: renamed `.deleted`, removed `file.delete.delay.ms` later.

Kafka deletes segment files asynchronously so that a reader still holding a segment
(a fetch that looked it up a moment ago) never finds its file handle closed under it.
Here the delay also covers the cleaner's threads and a flush in flight. A crash leaves
`.deleted` files behind; the loader removes them at the next start.
"""

from __future__ import annotations

import logging
import threading

from odradek.storage.segment import DELETED_SUFFIX, LogSegment

log = logging.getLogger(__name__)


class DelayedDeleter:
    """One log's segments waiting to be removed. Thread safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[tuple[int, LogSegment]] = []  # (due ms, segment)

    def __len__(self) -> int:
        return len(self._pending)

    def schedule(self, segments: list[LogSegment], now_ms: int, delay_ms: int) -> None:
        """Rename the segments `.deleted` (OSError propagates) and remove them after
        `delay_ms` — at once when it is 0, which is safe only on the log's owner thread."""
        for seg in segments:
            seg.change_file_suffixes(seg.suffix, DELETED_SUFFIX)
            if delay_ms <= 0:
                seg.delete()
            else:
                with self._lock:
                    self._pending.append((now_ms + delay_ms, seg))

    def purge(self, now_ms: int) -> int:
        """Remove the segments whose delay is up; returns how many went."""
        if not self._pending:
            return 0  # the usual case, every second for every log: no lock, no lists
        with self._lock:
            due = [seg for t, seg in self._pending if t <= now_ms]
            self._pending = [(t, seg) for t, seg in self._pending if t > now_ms]
        for seg in due:
            try:
                seg.delete()
            except OSError as exc:
                log.warning("could not remove %s: %s", seg.log_path, exc)
        return len(due)

    def purge_all(self, *, remove_files: bool = True) -> None:
        """At close: everything goes now (or, on a failed disk, only the handles)."""
        with self._lock:
            pending, self._pending = self._pending, []
        for _, seg in pending:
            try:
                if remove_files:
                    seg.delete()
                else:
                    seg.close_handles()
            except OSError:
                seg.close_handles()  # the loader removes leftover `.deleted` files
