"""A follower's connection to a leader: Kafka requests over one TCP stream.

One request in flight at a time (a fetcher waits for each answer before the next), so
responses are matched by order and checked by correlation id. The framing is
protocol/client_framing.py's (requests built with kio; responses decoded by kio, whose
native reader hands the records out as bytes without looking inside them).
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


class BrokerChannel:
    def __init__(self, host: str, port: int, client_id: str, timeout_s: float,
                 receive_buffer_bytes: int = -1) -> None:
        self.receive_buffer_bytes = receive_buffer_bytes  # -1: the OS's (autotuned)
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._framing = ClientFraming(client_id)

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def connect(self) -> None:
        self._reader, self._writer = await asyncio.wait_for(self._open(), self.timeout_s)

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.receive_buffer_bytes <= 0:
            return await asyncio.open_connection(self.host, self.port, limit=1 << 20)
        # SO_RCVBUF before connecting, so that the window it implies is negotiated
        loop = asyncio.get_running_loop()
        family, kind, proto, _, address = (await loop.getaddrinfo(
            self.host, self.port, type=socket.SOCK_STREAM))[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)
            await loop.sock_connect(sock, address)
            return await asyncio.open_connection(sock=sock, limit=1 << 20)
        except BaseException:
            with contextlib.suppress(OSError):
                sock.close()
            raise

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    async def call(self, api_key: int, version: int, body: Any,
                   extra_wait_s: float = 0.0) -> Any:
        """Send one request and decode its response; raises OSError-like errors (and
        closes) when the connection breaks or the answer is late."""
        if not self.connected:
            await self.connect()
        assert self._reader is not None and self._writer is not None
        correlation_id, request = self._framing.request(api_key, version, body)
        try:
            self._writer.write(request)
            frame = await asyncio.wait_for(self._read_frame(), self.timeout_s + extra_wait_s)
        except BaseException:
            self.close()
            raise
        try:
            return decode_response(api_key, version, frame, correlation_id)
        except CorrelationMismatch:
            self.close()
            raise

    async def _read_frame(self) -> bytes:
        assert self._reader is not None
        size = frame_size(await self._reader.readexactly(SIZE_PREFIX))
        return await self._reader.readexactly(size)
