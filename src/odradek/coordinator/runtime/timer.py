"""A partition's timers, owned by the runtime (Kafka's CoordinatorTimer).

A state machine schedules work by key: scheduling a key again replaces its timer, so a
member's session timer is one entry however often it heartbeats. When the partition
is unloaded every timer of it is cancelled: a state machine that lost its partition
never acts on it again."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable

log = logging.getLogger(__name__)


class CoordinatorTimer:
    def __init__(self, name: str) -> None:
        self.name = name
        self._handles: dict[Hashable, asyncio.TimerHandle] = {}
        self._closed = False

    def schedule(self, key: Hashable, delay_ms: int, fn: Callable[[], None]) -> None:
        """Run `fn` on the loop after `delay_ms`, replacing `key`'s previous timer."""
        self.cancel(key)
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        self._handles[key] = loop.call_later(max(delay_ms, 0) / 1000, self._fire, key, fn)

    def _fire(self, key: Hashable, fn: Callable[[], None]) -> None:
        self._handles.pop(key, None)
        try:
            fn()
        except Exception:
            # one state machine's bug must not take the partition's other timers with it
            log.exception("timer %r of %s failed", key, self.name)

    def cancel(self, key: Hashable) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._handles

    def __len__(self) -> int:
        return len(self._handles)

    def close(self) -> None:
        """Cancel every timer; later schedules are ignored."""
        self._closed = True
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()
