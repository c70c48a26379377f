"""Response frames read straight into their own buffers (asyncio's BufferedProtocol).

A replica fetch answers with up to `replica.fetch.response.max.bytes` of records. Read
through a StreamReader, each megabyte was copied three times before kio saw it: into
the reader's buffer (once per chunk received), out of it by `readexactly`, and
by the buffer's compaction. Here the socket receives into a scratch buffer while no
large frame is under way (small answers cost one copy, and several may arrive in one
receive), and a frame larger than what is already in the scratch gets a buffer of
its exact size that the socket fills in place.

One request is in flight at a time on a broker channel, so frames are handed out in
order by `read_frame`.

The size prefix is the other side's word: a frame buffer is allocated whole only up to
EAGER_BYTES (a default replica fetch answers 10 MiB at most); beyond it the buffer
grows, doubling, with what has arrived, so a peer that announces gigabytes and sends
little costs little.
"""

from __future__ import annotations

import asyncio
from collections import deque

from odradek.protocol.client_framing import SIZE_PREFIX, frame_size

SCRATCH_BYTES = 256 * 1024
EAGER_BYTES = 16 * 1024 * 1024


class FrameStream(asyncio.BufferedProtocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._scratch = bytearray(SCRATCH_BYTES)
        self._scratch_view = memoryview(self._scratch)
        self._held = 0  # bytes of the scratch not yet cut into frames
        self._frame: bytearray | None = None  # a large frame being filled in place
        self._frame_size = 0  # what its prefix announced (the buffer may still be shorter)
        self._filled = 0
        self._frames: deque[bytearray] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None

    # ---- the transport's side -------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses: no isinstance check
        self.transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        frame = self._frame
        if frame is not None:
            if self._filled == len(frame):  # full so far, yet short of the announced size
                # a new buffer, not extend(): the transport may still hold a view of this one
                grown = bytearray(min(2 * len(frame), self._frame_size))
                grown[:self._filled] = frame
                frame = self._frame = grown
            return memoryview(frame)[self._filled:]
        return self._scratch_view[self._held:]

    def buffer_updated(self, nbytes: int) -> None:
        try:
            if self._frame is not None:
                self._filled += nbytes
                if self._filled == self._frame_size:
                    self._deliver(self._frame)
                    self._frame = None
                return
            self._held += nbytes
            self._cut_scratch()
        except ConnectionError as e:  # a negative size: the stream is not Kafka's
            self._fail(e)
            if self.transport is not None:
                self.transport.close()

    def _cut_scratch(self) -> None:
        """Hand out the whole frames in the scratch; move a partial one to the front,
        or into its own buffer when it would not fit."""
        view, held, start = self._scratch_view, self._held, 0
        while held - start >= SIZE_PREFIX:
            size = frame_size(view[start:start + SIZE_PREFIX])
            end = start + SIZE_PREFIX + size
            if end > held:
                break
            self._deliver(bytearray(view[start + SIZE_PREFIX:end]))
            start = end
        rest = held - start
        if rest >= SIZE_PREFIX:
            size = frame_size(view[start:start + SIZE_PREFIX])
            if SIZE_PREFIX + size > SCRATCH_BYTES:
                frame = bytearray(min(size, EAGER_BYTES))
                got = rest - SIZE_PREFIX
                frame[:got] = view[start + SIZE_PREFIX:held]
                self._frame, self._frame_size, self._filled, self._held = frame, size, got, 0
                return
        if start:
            view[:rest] = view[start:held]
        self._held = rest

    def eof_received(self) -> bool:
        # an OSError, as every caller of a broker channel expects of a broken one
        self._fail(ConnectionError("the other broker closed the connection"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or ConnectionError("the connection was closed"))

    # ---- the channel's side ---------------------------------------------------------

    async def read_frame(self) -> bytearray:
        """The next response frame, without its size prefix."""
        while not self._frames:
            if self._error is not None:
                raise self._error
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        return self._frames.popleft()

    def _deliver(self, frame: bytearray) -> None:
        self._frames.append(frame)
        self._wake()

    def _fail(self, exc: BaseException) -> None:
        if self._error is None:
            self._error = exc
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
