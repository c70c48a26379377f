"""One client connection: frames in, responses out, in order.

A `BufferedProtocol`: small requests are parsed from one reusable receive buffer; a
large request (a big produce) gets its own bytearray that the socket fills directly,
so its records are copied from the kernel exactly once and stay writable for the log
to patch offsets in place.

Requests on a connection are handled one at a time, as Kafka does: while a handler
waits (a long-poll fetch), later requests queue, so responses leave in request order.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import struct
import sys
from typing import TYPE_CHECKING, Any, cast

from odradek.protocol.errors import InvalidRequest, KafkaError, UnsupportedVersion
from odradek.protocol.headers import peek_ids, read_request_header
from odradek.protocol.messages import (
    api_name,
    decode_request,
    encode_response,
    is_flexible_request,
)
from odradek.server.handlers import HANDLERS
from odradek.server.handlers.api_versions import API_KEY as API_VERSIONS
from odradek.server.handlers.api_versions import unsupported_version_response
from odradek.server.handlers.base import CLOSE_CONNECTION, Encoded, RequestContext

if TYPE_CHECKING:
    from odradek.server.broker import Broker

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
RECV_BUFFER = 256 * 1024
_DIRECT_THRESHOLD = RECV_BUFFER // 2


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, broker: Broker, listener: str) -> None:
        self.broker = broker
        self.listener = listener
        self.transport: asyncio.Transport | None = None
        self.peer = ("?", 0)
        self._buf = bytearray(RECV_BUFFER)
        self._view = memoryview(self._buf)
        self._start = 0
        self._end = 0
        self._big: bytearray | None = None
        self._big_filled = 0
        self._queue: collections.deque[bytearray] = collections.deque()
        self._busy = False
        self._paused = False
        self._closed = False
        self.last_active = 0.0

    # ---- asyncio callbacks ------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but behave as one
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = (str(peer[0]), int(peer[1]))
        self.last_active = asyncio.get_running_loop().time()
        self.broker.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self.broker.connections.discard(self)
        self._queue.clear()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_filled :]
        if self._end == len(self._buf):
            # move the unparsed tail to the front to make room
            tail = self._end - self._start
            self._view[:tail] = self._view[self._start : self._end]
            self._start, self._end = 0, tail
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled == len(self._big):
                frame, self._big = self._big, None
                self._on_frame(frame)
                self._parse()
            return
        self._end += nbytes
        self._parse()

    def eof_received(self) -> bool | None:
        return False

    # ---- framing ----------------------------------------------------------------

    def _parse(self) -> None:
        max_size = self.broker.max_request_size
        while self._end - self._start >= 4 and not self._closed:
            (size,) = _SIZE.unpack_from(self._buf, self._start)
            if size < 0 or size > max_size:
                log.warning("closing connection from %s:%d: request size %d outside 0..%d",
                            *self.peer, size, max_size)
                self.close()
                return
            available = self._end - self._start - 4
            body = self._start + 4
            if available >= size:
                frame = bytearray(self._view[body : body + size])
                self._start = body + size
                self._on_frame(frame)
                continue
            if size > _DIRECT_THRESHOLD or size > len(self._buf) - 4:
                big = bytearray(size)
                big[:available] = self._view[body : self._end]
                self._big, self._big_filled = big, available
                self._start = self._end = 0
            return
        if self._start == self._end:
            self._start = self._end = 0

    def _on_frame(self, frame: bytearray) -> None:
        loop = asyncio.get_running_loop()
        self.last_active = loop.time()
        if self._busy:
            self._queue.append(frame)
            if not self._paused and len(self._queue) >= self.broker.max_queued_requests:
                assert self.transport is not None
                self.transport.pause_reading()
                self._paused = True
            return
        self._handle(frame)

    # ---- requests ---------------------------------------------------------------

    def _handle(self, frame: bytearray) -> None:
        try:
            api_key, version, correlation_id = peek_ids(frame)
        except InvalidRequest:
            log.warning("closing connection from %s:%d: request shorter than a header",
                        *self.peer)
            self.close()
            return
        handler = HANDLERS.get(api_key)
        if handler is None:
            log.warning("closing connection from %s:%d: unknown api key %d", *self.peer, api_key)
            self.close()
            return
        if not handler.min_version <= version <= handler.max_version:
            if api_key == API_VERSIONS:
                v, body = unsupported_version_response()
                self._send(encode_response(api_key, v, correlation_id, body))
                return
            log.warning("closing connection from %s:%d: %s v%d is not supported (%d-%d)",
                        *self.peer, api_name(api_key), version, handler.min_version,
                        handler.max_version)
            self.close()
            return
        started = self.broker.metrics.on_request(api_key)  # counts it, starts its clock
        try:
            # kio's native readers insist on read-only buffers
            view = memoryview(frame).toreadonly()
            header, offset = read_request_header(view, is_flexible_request(api_key, version))
            if handler.decode is not None:
                request = handler.decode(frame, offset, version)
            else:
                request = decode_request(api_key, version, view, offset)
        except (InvalidRequest, UnsupportedVersion) as e:
            log.warning("closing connection from %s:%d: %s", *self.peer, e)
            self.close()
            return
        ctx = RequestContext(self.broker, header, self.peer[0], self.peer[1], self.listener)
        try:
            result = handler.handle(ctx, request)
        except Exception:
            self._handler_failed(api_key, version)
            return
        if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
            self._busy = True
            task = asyncio.ensure_future(result)
            task.add_done_callback(
                lambda t: self._finish(t, api_key, version, correlation_id, request, started))
            self.broker.track(task)
            return
        self._respond(result, api_key, version, correlation_id)
        self.broker.metrics.on_response(api_key, started, request, result)

    def _finish(self, task: asyncio.Future[Any], api_key: int, version: int,
                correlation_id: int, request: Any = None, started: float = 0.0) -> None:
        self._busy = False
        if self._closed:
            return
        if task.cancelled():
            self.close()
            return
        exc = task.exception()
        if exc is not None:
            self._handler_failed(api_key, version, exc)
            return
        self._respond(task.result(), api_key, version, correlation_id)
        self.broker.metrics.on_response(api_key, started, request, task.result())
        self._drain()

    def _drain(self) -> None:
        while self._queue and not self._busy and not self._closed:
            self._handle(self._queue.popleft())
        if self._paused and len(self._queue) < self.broker.max_queued_requests // 2:
            assert self.transport is not None
            self.transport.resume_reading()
            self._paused = False

    def _respond(self, result: Any, api_key: int, version: int, correlation_id: int) -> None:
        if result is None:
            return
        if result is CLOSE_CONNECTION:
            self.close()
            return
        if isinstance(result, Encoded):
            self._send(result.frame)
            return
        try:
            data = encode_response(api_key, version, correlation_id, result)
        except Exception:
            self._handler_failed(api_key, version)
            return
        self._send(data)

    def _handler_failed(self, api_key: int, version: int, exc: BaseException | None = None) -> None:
        self.broker.metrics.on_error(api_key, exc or sys.exception())
        if isinstance(exc, KafkaError):
            log.warning("%s v%d from %s:%d failed: %s", api_name(api_key), version, *self.peer,
                        exc)
        else:
            log.error("%s v%d from %s:%d failed; closing the connection", api_name(api_key),
                      version, *self.peer, exc_info=exc or True)
        self.close()

    def _send(self, data: bytes | bytearray) -> None:
        if self.transport is not None and not self._closed:
            self.transport.write(data)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._queue.clear()
            if self.transport is not None:
                self.transport.close()
