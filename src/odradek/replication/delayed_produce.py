"""Delayed produce: an acks=all write waits here until the ISR has it.

Each partition of the request is satisfied when its high watermark passes the last
offset the request appended there. The leader checks its waiters whenever its high
watermark advances (a follower fetched), its ISR changes, or it stops leading; the
timer answers what is left with REQUEST_TIMED_OUT, as Kafka's DelayedProduce does.
"""

from __future__ import annotations

import asyncio
import contextlib

from odradek.protocol.errors import ErrorCode


class DelayedProduce:
    __slots__ = ("_future", "_pending", "errors")

    def __init__(self) -> None:
        # (topic, partition) -> the error the partition ends with; absent while waiting
        self.errors: dict[tuple[str, int], ErrorCode] = {}
        self._pending = 0
        self._future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def expect(self) -> None:
        """One more partition to wait for (registered with the partition's waiters)."""
        self._pending += 1

    def satisfy(self, tp: tuple[str, int], error: ErrorCode) -> None:
        if tp in self.errors:
            return
        self.errors[tp] = error
        self._pending -= 1
        if self._pending <= 0 and not self._future.done():
            self._future.set_result(None)

    @property
    def done(self) -> bool:
        return self._future.done()

    async def wait(self, timeout_s: float) -> dict[tuple[str, int], ErrorCode]:
        """The errors per partition; those still waiting at the timeout have
        REQUEST_TIMED_OUT."""
        if self._pending > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._future), max(timeout_s, 0))
        return self.errors

    def timed_out(self, tp: tuple[str, int]) -> ErrorCode:
        return self.errors.get(tp, ErrorCode.request_timed_out)
