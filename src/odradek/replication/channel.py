"""A follower's connection to a leader: Kafka requests over one TCP stream.

One request in flight at a time (a fetcher waits for each answer before the next), so
responses are matched by order and checked by correlation id. The framing is
protocol/client_framing.py's (requests built with kio; responses decoded by kio, whose
native reader hands the records out as bytes without looking inside them).

The socket is read by a `BufferedProtocol` that lets the kernel write each response
frame straight into one buffer of the frame's size: a fetched megabyte is copied once
from the socket, where a StreamReader copied it into its buffer, then out of it again
(and moved what followed) — the follower's side of replication is mostly these bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any

from odradek.protocol.client_framing import (
    SIZE_PREFIX,
    ClientFraming,
    CorrelationMismatch,
    decode_response,
    frame_size,
)


class _FrameReader(asyncio.BufferedProtocol):
    """Frames, each read into its own bytearray; one awaited at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._prefix = bytearray(SIZE_PREFIX)
        self._frame: bytearray | None = None
        self._filled = 0
        self._frames: list[bytearray] = []
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is None:
            return memoryview(self._prefix)[self._filled:]
        return memoryview(self._frame)[self._filled:]

    def buffer_updated(self, nbytes: int) -> None:
        self._filled += nbytes
        if self._frame is None:
            if self._filled < SIZE_PREFIX:
                return
            try:
                size = frame_size(self._prefix)
            except ConnectionError as e:
                self._fail(e)
                return
            self._frame = bytearray(size)
            self._filled = 0
            if size:
                return
        if self._filled == len(self._frame):
            self._frames.append(self._frame)
            self._frame = None
            self._filled = 0
            if self.transport is not None:
                self.transport.pause_reading()  # one answer per request: no read-ahead
            self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or ConnectionError("the leader closed the connection"))

    def _fail(self, exc: BaseException) -> None:
        if self._error is None:
            self._error = exc
        if self.transport is not None:
            self.transport.abort()
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def next_frame(self) -> bytearray:
        while not self._frames:
            if self._error is not None:
                raise ConnectionError(str(self._error) or type(self._error).__name__)
            self._waiter = asyncio.get_running_loop().create_future()
            if self.transport is not None:
                self.transport.resume_reading()
            await self._waiter
        return self._frames.pop(0)


class BrokerChannel:
    def __init__(self, host: str, port: int, client_id: str, timeout_s: float,
                 receive_buffer_bytes: int = -1) -> None:
        self.receive_buffer_bytes = receive_buffer_bytes  # -1: the OS's (autotuned)
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._reader: _FrameReader | None = None
        self._framing = ClientFraming(client_id)

    @property
    def connected(self) -> bool:
        r = self._reader
        return (r is not None and r.transport is not None and not r.transport.is_closing()
                and r._error is None)

    async def connect(self) -> None:
        self._reader = await asyncio.wait_for(self._open(), self.timeout_s)

    async def _open(self) -> _FrameReader:
        loop = asyncio.get_running_loop()
        if self.receive_buffer_bytes <= 0:
            _, reader = await loop.create_connection(_FrameReader, self.host, self.port)
            return reader
        # SO_RCVBUF before connecting, so that the window it implies is negotiated
        family, kind, proto, _, address = (await loop.getaddrinfo(
            self.host, self.port, type=socket.SOCK_STREAM))[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)
            await loop.sock_connect(sock, address)
            _, reader = await loop.create_connection(_FrameReader, sock=sock)
            return reader
        except BaseException:
            with contextlib.suppress(OSError):
                sock.close()
            raise

    def close(self) -> None:
        if self._reader is not None and self._reader.transport is not None:
            self._reader.transport.close()
        self._reader = None

    async def call(self, api_key: int, version: int, body: Any,
                   extra_wait_s: float = 0.0) -> Any:
        """Send one request and decode its response; raises OSError-like errors (and
        closes) when the connection breaks or the answer is late."""
        if not self.connected:
            await self.connect()
        reader = self._reader
        assert reader is not None and reader.transport is not None
        correlation_id, request = self._framing.request(api_key, version, body)
        try:
            reader.transport.write(request)
            frame = await asyncio.wait_for(reader.next_frame(), self.timeout_s + extra_wait_s)
        except BaseException:
            self.close()
            raise
        try:
            return decode_response(api_key, version, memoryview(frame).toreadonly(),
                                   correlation_id)
        except CorrelationMismatch:
            self.close()
            raise
