"""One client connection: frames in, responses out, in order, in bounded memory.

A `BufferedProtocol`: small requests are parsed from one small reusable receive
buffer (an idle connection costs little); a large request (a big produce) gets its own
bytearray that the socket fills directly, so its records are copied from the kernel
once and stay writable for the log to patch offsets in place. That bytearray grows as
its bytes arrive (doubling), never on the length a client announces alone: a client
that claims 100 MB and stalls holds at most the first chunk.

Requests on a connection are handled one at a time, as Kafka does: while a handler
waits (a long-poll fetch), later requests queue, so responses leave in request order.
One exception: an acks=all Produce that has appended and only waits for the in-sync
replicas (`AwaitingReplicas`) lets the next request in; its answer is owed in order
(`_ordered`), so a producer's throughput is not one request per replication round trip.
Memory a client controls is bounded both ways: reading pauses while the requests
queued on the connection pass a byte or count bound, and while the transport holds
more than its high-water mark of unsent response bytes (a client that does not read
its socket) the connection handles nothing more — it costs about one response, as in
Kafka, where the channel is muted until its response is sent. What happens to each
request is the request pipeline's (pipeline.py).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import struct
from typing import TYPE_CHECKING, Any, cast

from odradek.coordinator.share.sessions import connection_of
from odradek.server.handlers.base import CLOSE_CONNECTION, AwaitingReplicas
from odradek.server.pipeline import Client
from odradek.storage.descriptors import is_exhausted

if TYPE_CHECKING:
    from odradek.server.broker import Broker
    from odradek.server.listener_security import ListenerSecurity

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
RECV_BUFFER = 16 * 1024  # per connection, for the many small requests
FIRST_CHUNK = 256 * 1024  # a large frame's first allocation; it doubles as bytes arrive
QUEUED_BYTES = 4 * 1024 * 1024  # read-ahead of one connection beyond the request in hand
WRITE_HIGH_WATER = 1024 * 1024  # unsent response bytes before the connection is muted
WRITE_LOW_WATER = 256 * 1024


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, broker: Broker, security: ListenerSecurity) -> None:
        self.broker = broker
        self.pipeline = broker.pipeline
        self.listener = security.name
        self.security = security.for_connection("?")
        self.client = Client("?", 0, self.listener, self.security)
        self.transport: asyncio.Transport | None = None
        self.peer = ("?", 0)
        self._buf = bytearray(RECV_BUFFER)
        self._view = memoryview(self._buf)
        self._start = 0
        self._end = 0
        self._big: bytearray | None = None
        self._big_size = 0  # the size announced for the frame being read into _big
        self._big_filled = 0
        self._queue: collections.deque[bytearray] = collections.deque()
        self._queued_bytes = 0
        self._busy = False
        self._current: asyncio.Future[Any] | None = None
        # answers owed in request order while acks=all produces wait for the ISR (the
        # connection handles later requests meanwhile): tasks, or replies ready early
        self._ordered: collections.deque[Any] = collections.deque()
        self._read_paused = False
        self._write_paused = False
        self._throttled = False  # muted by a quota (KIP-219) until its throttle time ends
        self._closed = False
        self._admitted = False  # counted by the connection limits until it closes
        self.last_active = 0.0

    # ---- asyncio callbacks ------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but behave as one
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = (str(peer[0]), int(peer[1]))
        admission = self.broker.connection_limits.admit(self.listener, self.peer[0])
        if admission.refused is not None:
            self._closed = True  # at once: it costs nothing more than its socket did
            self.transport.abort()
            return
        self._admitted = True
        if admission.delay_ms > 0:
            # over a creation rate: not read until the time is up (then served, or
            # closed for an ip's connection_creation_rate quota, as Kafka does)
            self._throttled = True
            self.transport.pause_reading()
            self._read_paused = True
            asyncio.get_running_loop().call_later(
                admission.delay_ms / 1000,
                self.close if admission.close_after_delay else self._unmute)
        if peer:
            self.security = self.security.listener.for_connection(f"{peer[0]}:{peer[1]}")
            self.client = Client(self.peer[0], self.peer[1], self.listener, self.security)
        self.security.on_tls_established(transport.get_extra_info("ssl_object"))
        self.transport.set_write_buffer_limits(WRITE_HIGH_WATER, WRITE_LOW_WATER)
        self.last_active = asyncio.get_running_loop().time()
        self.broker.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._admitted:
            self._admitted = False
            self.broker.connection_limits.release(self.listener, self.peer[0])
        self._closed = True
        self.broker.connections.discard(self)
        self._queue.clear()
        self._big = None
        shares = getattr(self.broker, "shares", None)
        if shares is not None:  # its share sessions close: what they hold is released
            shares.partitions.connection_closed(
                connection_of(self.listener, self.peer[0], self.peer[1]))

    def pause_writing(self) -> None:
        """The client is not reading its responses: handle nothing more until it does."""
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()
        self._drain()

    def get_buffer(self, sizehint: int) -> memoryview:
        big = self._big
        if big is not None:
            if self._big_filled == len(big):
                # more of the frame is coming: grow by doubling (bounded by its size)
                grown = bytearray(min(self._big_size, 2 * len(big)))
                grown[: self._big_filled] = big
                self._big = big = grown
            return memoryview(big)[self._big_filled :]
        if self._end == len(self._buf):
            # move the unparsed tail to the front to make room
            tail = self._end - self._start
            self._view[:tail] = self._view[self._start : self._end]
            self._start, self._end = 0, tail
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled == self._big_size:
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
            if size > len(self._buf) - 4:
                big = bytearray(min(size, max(FIRST_CHUNK, available)))
                big[:available] = self._view[body : self._end]
                self._big, self._big_size, self._big_filled = big, size, available
                self._start = self._end = 0
            return
        if self._start == self._end:
            self._start = self._end = 0

    def _on_frame(self, frame: bytearray) -> None:
        loop = asyncio.get_running_loop()
        self.last_active = loop.time()
        if self._busy or self._write_paused or self._throttled or self._queue:
            self._queue.append(frame)
            self._queued_bytes += len(frame)
            self._update_reading()
            return
        self._handle(frame)

    def _update_reading(self) -> None:
        """Read while the connection may take more: its queue is short and its client
        reads what it is sent."""
        if self.transport is None or self._closed:
            return
        full = (self._write_paused or self._throttled
                or len(self._queue) >= self.broker.max_queued_requests
                or self._queued_bytes >= QUEUED_BYTES)
        if full and not self._read_paused:
            self.transport.pause_reading()
            self._read_paused = True
        elif not full and self._read_paused:
            self.transport.resume_reading()
            self._read_paused = False

    # ---- requests ---------------------------------------------------------------

    def _handle(self, frame: bytearray) -> None:
        try:
            reply = self.pipeline.process(frame, self.client)
        except OSError as exc:
            # Out of descriptors before the handler ran (the request's schema module is
            # imported on first use): let the reserve go and try once more, rather
            # than lose a connection that was working
            if not is_exhausted(exc):
                raise
            self.broker.logs.descriptor_warnings.refused("requests served from the reserve", exc)
            with self.broker.descriptor_reserve.released():
                reply = self.pipeline.process(frame, self.client)
        if isinstance(reply, AwaitingReplicas):
            self._mute_if_throttled()  # its throttle is known now, its answer comes later
            waiting = asyncio.ensure_future(reply.wait)
            self._ordered.append(waiting)
            waiting.add_done_callback(self._flush_ordered)
            self.broker.track(waiting)
            if len(self._ordered) >= self.broker.max_queued_requests:
                self._busy = True  # enough in flight: the next waits for the oldest
            return
        if asyncio.iscoroutine(reply):
            self._busy = True
            task = self._current = asyncio.ensure_future(reply)
            task.add_done_callback(self._finish)
            self.broker.track(task)
            return
        self._respond(reply)

    def _finish(self, task: asyncio.Future[Any]) -> None:
        self._busy = len(self._ordered) >= self.broker.max_queued_requests
        if self._closed:
            return
        if task.cancelled() or task.exception() is not None:
            # the pipeline answers every failure itself: this is a bug or a shutdown
            if not task.cancelled():
                log.error("request from %s:%d failed", *self.peer, exc_info=task.exception())
            self.close()
            return
        self._respond(task.result())
        self._drain()

    def _flush_ordered(self, _task: asyncio.Future[Any] | None = None) -> None:
        """Send the answers at the head of the order that are ready."""
        while self._ordered and not self._closed:
            head = self._ordered[0]
            if isinstance(head, asyncio.Future):
                if not head.done():
                    break
                self._ordered.popleft()
                if head.cancelled() or head.exception() is not None:
                    if not head.cancelled():
                        log.error("request from %s:%d failed", *self.peer,
                                  exc_info=head.exception())
                    self.close()
                    return
                self._send_reply(head.result())
            else:
                self._ordered.popleft()
                self._send_reply(head)
        if self._busy and len(self._ordered) < self.broker.max_queued_requests and \
                not self._pending_task():
            self._busy = False
            self._drain()

    def _pending_task(self) -> bool:
        """A sequential request (not a pipelined produce) is being handled."""
        return self._current is not None and not self._current.done()

    def _drain(self) -> None:
        while (self._queue and not self._busy and not self._write_paused
               and not self._throttled and not self._closed):
            frame = self._queue.popleft()
            self._queued_bytes -= len(frame)
            self._handle(frame)
        self._update_reading()

    def _mute_if_throttled(self) -> None:
        channel = self.client.channel
        if channel.throttle_ms > 0:
            # Kafka mutes a throttled client's channel once its response is on its way:
            # nothing more is read or handled from it until the time is up
            self._throttled = True
            self._update_reading()
            asyncio.get_running_loop().call_later(channel.throttle_ms / 1000, self._unmute)
            channel.throttle_ms = 0

    def _respond(self, reply: Any) -> None:
        self._mute_if_throttled()
        if self._ordered:  # behind answers still owed
            self._ordered.append(reply)
            return
        self._send_reply(reply)

    def _send_reply(self, reply: Any) -> None:
        if reply is None:
            return
        if reply is CLOSE_CONNECTION:
            self.close()
            return
        self._send(reply)
        if self.security.close_after_ms is not None:  # a failed login was answered
            asyncio.get_running_loop().call_later(self.security.close_after_ms / 1000,
                                                  self.close)
            self.security.close_after_ms = None

    def _unmute(self) -> None:
        self._throttled = False
        if not self._closed:
            self._update_reading()
            self._drain()

    @property
    def idle(self) -> bool:
        """Neither handling a request nor holding queued ones (a long-poll fetch waiting
        is not idleness)."""
        return not self._busy and not self._queue

    def _send(self, data: bytes | bytearray) -> None:
        if self.transport is not None and not self._closed:
            self.last_active = asyncio.get_running_loop().time()
            self.transport.write(data)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._queue.clear()
            if self.transport is not None:
                self.transport.close()
