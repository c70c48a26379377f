"""`queued.max.request.bytes`: one budget for the request bytes every connection holds.

Kafka's SocketServer takes each request's buffer from a memory pool shared by all
connections and mutes a connection whose next buffer the pool cannot give until memory
comes back; its default (-1) is no bound. Ours differs in two ways:

- memory is taken as bytes arrive (a frame's buffer grows fourfold when it fills, each
  step taken from the pool), never on the 4-byte length a client announces: a client
  that claims 100 MB and stalls holds about what it sent, not 100 MB;
- the default is a bound, 100 MiB (the largest request, `socket.request.max.bytes`,
  must fit: a smaller value is refused at start-up as Kafka refuses it), and a
  response the transport still holds beyond its high-water mark counts too.

Held bytes: frames being read, queued, or being handled (until the handler returns),
and unsent response bytes above the transport's high-water mark. A connection that
cannot take what it needs stops reading and waits in line; each `give` wakes the
waiters in arrival order while memory lasts. When everything the pool lends is held by
connections that are themselves waiting (partial frames that need more to finish,
which would wait on each other forever), the first in line is served anyway.
"""

from __future__ import annotations

import collections
from collections.abc import Callable


class MemoryPool:
    def __init__(self, capacity: int) -> None:
        """`capacity` ≤ 0: no bound (Kafka's -1); the pool still counts."""
        self.capacity = capacity
        self.used = 0
        self.peak = 0
        self.muted = 0  # connections that waited for memory, since start
        self._waiters: collections.deque[tuple[Callable[[], None], int, int]] = \
            collections.deque()
        self._waiting_held = 0  # what the waiting connections hold themselves

    @property
    def bounded(self) -> bool:
        return self.capacity > 0

    @property
    def available(self) -> int:
        return self.capacity - self.used if self.bounded else 1 << 62

    @property
    def exhausted(self) -> bool:
        return self.bounded and self.used >= self.capacity

    def try_take(self, n: int) -> bool:
        """Take `n` bytes if they fit (or if nothing is lent: a frame always progresses),
        and nobody waits in line before us."""
        if self.bounded and self.used and (self.used + n > self.capacity or self._waiters):
            return False
        self.take(n)
        return True

    def take(self, n: int) -> None:
        """Take `n` bytes that are already in memory (a small frame that arrived whole,
        a response in the transport), over the capacity if need be."""
        self.used += n
        if self.used > self.peak:
            self.peak = self.used

    def give(self, n: int) -> None:
        self.used -= n
        self._wake()

    def wait(self, granted: Callable[[], None], need: int, holding: int) -> None:
        """Call `granted` once `need` bytes are taken for the caller, which holds
        `holding` bytes of the pool meanwhile."""
        self.muted += 1
        self._waiters.append((granted, need, holding))
        self._waiting_held += holding
        self._wake()

    def forget(self, granted: Callable[[], None]) -> None:
        """A waiter went away (its connection closed)."""
        for entry in list(self._waiters):
            if entry[0] == granted:
                self._waiters.remove(entry)
                self._waiting_held -= entry[2]
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.bounded:
            granted, need, holding = self._waiters[0]
            stuck = self.used <= self._waiting_held  # only waiters hold memory
            if self.used and self.used + need > self.capacity and not stuck:
                return
            self._waiters.popleft()
            self._waiting_held -= holding
            self.take(need)
            granted()
