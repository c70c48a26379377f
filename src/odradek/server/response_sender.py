"""Sending a response whose records are slices of segment files (a Fetch's).

On a plaintext socket the slices go with `os.sendfile`: the kernel copies from the page
cache to the socket and Python never holds the records, as Kafka's sendfile path. Under
TLS the bytes must pass through the TLS layer: the slice is read in 256 KiB chunks,
each written only once the transport is below its high-water mark, so a client that
reads slowly costs a chunk and the transport's buffer, never the whole range.

uvloop has no `loop.sendfile` for its transports and refuses a reader or writer on a
descriptor a transport owns, so the sender works on a duplicate of the socket's
descriptor: it waits until the transport's own buffer is empty (the bytes written
before this response), then writes the response's bytes with `os.send` and its slices
with `os.sendfile`, waiting for writability with `add_writer` on the duplicate. The
connection writes nothing else meanwhile (its later responses wait in order).
"""

from __future__ import annotations

import asyncio
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


async def send_with_sendfile(transport: asyncio.Transport, parts: ResponseParts) -> None:
    """Write `parts` on the transport's socket itself, slices with sendfile."""
    loop = asyncio.get_running_loop()
    sock = os.dup(transport.get_extra_info("socket").fileno())
    try:
        # what the transport still holds goes first: wait until it is written
        while transport.get_write_buffer_size() > 0:
            await _writable(loop, sock)
            await asyncio.sleep(0)  # the transport writes on the same wake-up
            if transport.is_closing():
                raise ConnectionResetError("connection closed")
        since_yield = 0
        for part in parts.parts:
            if isinstance(part, FileRecords):
                since_yield = await _sendfile(loop, sock, part, since_yield)
            else:
                assert isinstance(part, bytes | bytearray)
                since_yield = await _send(loop, sock, memoryview(part), since_yield)
    finally:
        loop.remove_writer(sock)
        os.close(sock)


async def _send(loop: asyncio.AbstractEventLoop, sock: int, data: memoryview,
                since_yield: int) -> int:
    while data:
        try:
            n = os.write(sock, data)
        except BlockingIOError:
            await _writable(loop, sock)
            continue
        data = data[n:]
        since_yield = await _pace(since_yield + n)
    return since_yield


async def _sendfile(loop: asyncio.AbstractEventLoop, sock: int, records: FileRecords,
                    since_yield: int) -> int:
    try:
        fd = records.open()
    except OSError as exc:
        raise SliceCutShort(f"{records}: {exc}") from exc
    try:
        offset, left = records.position, records.size
        while left:
            try:
                n = os.sendfile(sock, fd, offset, left)
            except BlockingIOError:
                await _writable(loop, sock)
                continue
            if n == 0:
                raise SliceCutShort(f"{records}: the file ends {left} bytes short")
            offset += n
            left -= n
            since_yield = await _pace(since_yield + n)
    finally:
        os.close(fd)
    return since_yield


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


async def _pace(since_yield: int) -> int:
    if since_yield >= YIELD_EVERY:
        await asyncio.sleep(0)
        return 0
    return since_yield


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
