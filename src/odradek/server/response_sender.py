"""Sending a response whose records are slices of segment files (a Fetch's).

On a plaintext socket the slices go with `os.sendfile`: the kernel copies from the page
cache to the socket and Python never holds the records, as Kafka's sendfile path. Under
TLS the bytes must pass through the TLS layer: the slice is read in 256 KiB chunks,
each written only once the transport is below its high-water mark, so a client that
reads slowly costs a chunk and the transport's buffer, never the whole range.

uvloop has no `loop.sendfile` for its transports and refuses a reader or writer on a
descriptor a transport owns, so the sender works on a duplicate of the socket's
descriptor. When the transport holds nothing (the usual case) the response is written
at once, bytes with `os.write` and slices with `os.sendfile`, as far as the socket
takes it; only the rest costs a task, which waits for writability with `add_writer`
on a duplicate of the socket's descriptor. The connection writes nothing else
meanwhile (its later responses wait in order).
"""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Awaitable, Callable

from odradek.protocol.fetch_response import ResponseParts
from odradek.storage.file_records import FileRecords

CHUNK = 256 * 1024  # bytes of a slice held at a time under TLS
YIELD_EVERY = 4 * 1024 * 1024  # let other connections run at least this often


class SliceCutShort(Exception):
    """A slice's file ended before the slice did (truncated, or closed for good)."""


def can_sendfile(transport: asyncio.BaseTransport) -> bool:
    """A plain socket (no TLS layer) on a platform with sendfile."""
    return (hasattr(os, "sendfile") and transport.get_extra_info("ssl_object") is None
            and transport.get_extra_info("socket") is not None)


class SendfileWriter:
    """Writes `parts` on a socket itself, slices with sendfile, as far as the socket
    takes them now (`write_now`), the rest once it is writable again (`finish`)."""

    def __init__(self, parts: ResponseParts) -> None:
        self._parts = parts.parts
        self._index = 0
        self._done = 0  # bytes of the current part written

    def write_now(self, sock: int) -> bool:
        """Write until the socket would block or YIELD_EVERY bytes went (False), or all
        is written (True). A slice's file is leased for each call only."""
        parts, budget = self._parts, YIELD_EVERY
        while self._index < len(parts):
            part = parts[self._index]
            try:
                if isinstance(part, FileRecords):
                    size = part.size
                    n = self._sendfile(sock, part)
                else:
                    assert isinstance(part, bytes | bytearray)
                    size = len(part)
                    n = os.write(sock, memoryview(part)[self._done:])
            except BlockingIOError:
                return False
            self._done += n
            if self._done == size:
                self._index += 1
                self._done = 0
            budget -= n
            if budget <= 0 and self._index < len(parts):
                return False  # let other connections run; the socket is still writable
        return True

    def _sendfile(self, sock: int, part: FileRecords) -> int:
        left = part.size - self._done
        try:
            with part.file as fd:
                n = os.sendfile(sock, fd, part.position + self._done, left)
        except BlockingIOError:
            raise
        except OSError as exc:
            if exc.errno in _SOCKET_ERRORS:
                raise
            raise SliceCutShort(f"{part}: {exc}") from exc
        if n == 0:
            raise SliceCutShort(f"{part}: the file ends {left} bytes short")
        return n

    async def finish(self, transport: asyncio.Transport) -> None:
        """The rest, waiting for writability on a duplicate of the socket's descriptor
        (the transport owns the original in the loop)."""
        loop = asyncio.get_running_loop()
        sock = os.dup(transport.get_extra_info("socket").fileno())
        ready = asyncio.Event()
        # registered once for the whole response: a response of many writable rounds
        # costs no epoll change per round
        loop.add_writer(sock, ready.set)
        try:
            while not self.write_now(sock):
                ready.clear()
                await ready.wait()
                if transport.is_closing():
                    raise ConnectionResetError("connection closed")
        finally:
            loop.remove_writer(sock)
            os.close(sock)


_SOCKET_ERRORS = {errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.ESHUTDOWN}


async def send_with_sendfile(transport: asyncio.Transport, parts: ResponseParts) -> None:
    """Write `parts` on the transport's socket itself once what the transport holds
    is written (a response that follows bytes still in the transport's buffer)."""
    loop = asyncio.get_running_loop()
    sock = os.dup(transport.get_extra_info("socket").fileno())
    try:
        while transport.get_write_buffer_size() > 0:
            await _writable(loop, sock)
            await asyncio.sleep(0)  # the transport writes on the same wake-up
            if transport.is_closing():
                raise ConnectionResetError("connection closed")
    finally:
        os.close(sock)
    await SendfileWriter(parts).finish(transport)


async def send_in_chunks(transport: asyncio.Transport, parts: ResponseParts,
                         drained: Callable[[], Awaitable[None]], high_water: int) -> None:
    """Write `parts` through the transport (TLS), slices read a chunk at a time."""
    for part in parts.parts:
        if not isinstance(part, FileRecords):
            assert isinstance(part, bytes | bytearray)
            transport.write(part)
            continue
        reader = part.chunks(CHUNK)
        try:
            for chunk in reader:
                while transport.get_write_buffer_size() > high_water:
                    await drained()
                if transport.is_closing():
                    raise ConnectionResetError("connection closed")
                transport.write(chunk)
        except (OSError, EOFError) as exc:
            raise SliceCutShort(f"{part}: {exc}") from exc
        finally:
            reader.close()


async def _writable(loop: asyncio.AbstractEventLoop, sock: int) -> None:
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_writer(sock, wake)
    try:
        await ready
    finally:
        loop.remove_writer(sock)
