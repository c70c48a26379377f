"""Delayed fetches: a fetch that wants more bytes than there are waits here.

A waiting fetch registers with each partition it reads; every append to one of them
adds the appended bytes to the fetch's tally, and the fetch wakes the moment the tally
reaches `fetch.min.bytes` — not at `fetch.max.wait.ms` — or when its timer fires.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Protocol


class Watched(Protocol):
    waiters: set[DelayedFetch]


class DelayedFetch:
    __slots__ = ("_future", "_handle", "_partitions", "accumulated", "min_bytes",
                 "read_committed", "replica")

    def __init__(self, min_bytes: int, accumulated: int, read_committed: bool = False,
                 replica: bool = False) -> None:
        self.min_bytes = min_bytes
        self.accumulated = accumulated
        # woken by what moves the last stable offset, not by every append
        self.read_committed = read_committed
        # a follower's fetch reads up to the log end: woken by appends, where a
        # consumer's fetch of a replicated partition is woken by high watermark advances
        self.replica = replica
        self._future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._handle: asyncio.TimerHandle | None = None
        self._partitions: list[Watched] = []

    def watch(self, partitions: Iterable[Watched]) -> None:
        for p in partitions:
            p.waiters.add(self)
            self._partitions.append(p)

    def on_append(self, nbytes: int) -> None:
        self.accumulated += nbytes
        if self.accumulated >= self.min_bytes:
            self.complete()

    def complete(self) -> None:
        if not self._future.done():
            self._future.set_result(None)

    async def wait(self, timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        self._handle = loop.call_later(timeout_s, self.complete)
        try:
            await self._future
        finally:
            self._handle.cancel()
            for p in self._partitions:
                p.waiters.discard(self)
            self._partitions.clear()
