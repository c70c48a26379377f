"""One client connection: frames in, responses out, in order, in bounded memory.

A `BufferedProtocol`: small requests are parsed from one small reusable receive
buffer (an idle connection costs little); a large request (a big produce) gets its own
bytearray that the socket fills directly, so its records are copied from the kernel
once and stay writable for the log to patch offsets in place. That bytearray grows as
its bytes arrive (fourfold each time it fills: a 1 MB produce costs two steps, and
zero-filling and copying the steps of a doubling was 14% of a producer's broker CPU),
never on the length a client announces alone: a client that claims 100 MB and stalls
holds at most four times what it sent. Every step is taken from
the broker's memory pool (`queued.max.request.bytes`, memory_pool.py) shared by all
connections, and given back once the request is handled; a connection the pool cannot
serve stops reading until memory returns.

Requests on a connection are handled one at a time, as Kafka does: while a handler
waits (a long-poll fetch), later requests queue, so responses leave in request order.
One exception: an acks=all Produce that has appended and only waits for the in-sync
replicas (`AwaitingReplicas`) lets the next request in; its answer is owed in order
(`_ordered`), so a producer's throughput is not one request per replication round trip.
Memory a client controls is bounded both ways: reading pauses while the requests
queued on the connection pass a byte or count bound, and while the transport holds
more than its high-water mark of unsent response bytes (a client that does not read
its socket) the connection handles nothing more — it costs about one response, as in
Kafka, where the channel is muted until its response is sent. A Fetch's records are
slices of segment files (`ResponseParts`): sent with sendfile on a plaintext socket, in
bounded chunks under TLS (response_sender.py); while one is being sent the connection
handles nothing more and later answers wait behind it, in order. What happens to each
request is the request pipeline's (pipeline.py).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import struct
from typing import TYPE_CHECKING, Any, Protocol, cast

from odradek.coordinator.share.sessions import connection_of
from odradek.protocol.fetch_response import ResponseParts
from odradek.server.handlers.base import CLOSE_CONNECTION, AwaitingReplicas
from odradek.server.pipeline import Client
from odradek.server.response_sender import (
    SendfileWriter,
    SliceCutShort,
    can_sendfile,
    send_in_chunks,
    send_with_sendfile,
)
from odradek.storage.descriptors import is_exhausted

if TYPE_CHECKING:
    from odradek.coordinator.share import ShareGroups
    from odradek.server.connection_limits import ConnectionLimits
    from odradek.server.listener_security import ListenerSecurity
    from odradek.server.memory_pool import MemoryPool
    from odradek.server.pipeline import RequestPipeline
    from odradek.storage.descriptors import DescriptorReserve
    from odradek.storage.manager import LogManager

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
RECV_BUFFER = 16 * 1024  # per connection, for the many small requests
FIRST_CHUNK = 64 * 1024  # a large frame's first allocation; it grows as bytes arrive
GROWTH = 4  # a full frame buffer's next size, times its size
QUEUED_BYTES = 4 * 1024 * 1024  # read-ahead of one connection beyond the request in hand
WRITE_HIGH_WATER = 1024 * 1024  # unsent response bytes before the connection is muted
WRITE_LOW_WATER = 256 * 1024


class ConnectionHost(Protocol):
    """What a connection uses of the broker that accepted it (the Broker is one)."""

    pipeline: RequestPipeline
    connections: set[KafkaConnection]
    connection_limits: ConnectionLimits
    memory_pool: MemoryPool
    descriptor_reserve: DescriptorReserve
    logs: LogManager
    shares: ShareGroups
    max_request_size: int
    max_queued_requests: int

    def track(self, task: asyncio.Future[Any]) -> None: ...


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, broker: ConnectionHost, security: ListenerSecurity) -> None:
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
        # a response with file slices being sent, and the answers waiting behind it
        self._streaming: asyncio.Future[None] | None = None
        self._outbox: collections.deque[bytes | bytearray | ResponseParts] = \
            collections.deque()
        self._zero_copy = False
        self._drained: asyncio.Future[None] | None = None
        self._pool = broker.memory_pool
        self._pool_held = 0  # bytes of the pool this connection holds
        self._credit = 0  # taken from the pool, not yet used by a frame buffer
        self._memory_wait = 0  # bytes waited for (-1: room); reading stops meanwhile
        self._response_held = 0  # unsent response bytes beyond the high-water mark
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
        self._zero_copy = can_sendfile(transport)
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
        self._stop_streaming()
        if self._memory_wait:
            self._pool.forget(self._granted if self._memory_wait > 0 else self._granted_room)
            self._memory_wait = 0
        self._release(self._pool_held)

    def pause_writing(self) -> None:
        """The client is not reading its responses: handle nothing more until it does.
        What the transport holds counts in the memory pool meanwhile."""
        self._write_paused = True
        if self.transport is not None and not self._closed:
            held = self.transport.get_write_buffer_size()
            self._response_held += held
            self._pool.take(held)
            self._pool_held += held
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        held, self._response_held = self._response_held, 0
        self._release(held)
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._update_reading()
        self._drain()

    def get_buffer(self, sizehint: int) -> memoryview:
        big = self._big
        if big is not None:
            if self._big_filled == len(big):
                # not expected (reading pauses until the pool gives the next step), but
                # the transport asks for room: take it rather than fail the read
                self._grow(self._next_step(), forced=True)
                big = self._big
                assert big is not None
            return memoryview(big)[self._big_filled :]
        if self._end == len(self._buf):
            # move the unparsed tail to the front to make room
            tail = self._end - self._start
            self._view[:tail] = self._view[self._start : self._end]
            self._start, self._end = 0, tail
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        big = self._big
        if big is not None:
            self._big_filled += nbytes
            if self._big_filled == self._big_size:
                self._big = None
                self._on_frame(big)
                self._parse()
            elif self._big_filled == len(big):
                step = self._next_step()
                if self._take(step):
                    self._grow(step)
            return
        self._end += nbytes
        self._parse()

    def eof_received(self) -> bool | None:
        return False

    # ---- framing and the memory pool ---------------------------------------------

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
                self._hold(size)  # it is here already: counted, and may mute reading
                self._on_frame(frame)
                continue
            if size > len(self._buf) - 4:
                # a large frame gets its own buffer, sized by what arrived, not the claim
                first = min(size, max(FIRST_CHUNK, 2 * available))
                if not self._take(first):
                    return  # the bytes stay here until the pool has room
                big = bytearray(first)
                big[:available] = self._view[body : self._end]
                self._big, self._big_size, self._big_filled = big, size, available
                self._start = self._end = 0
            return
        if self._start == self._end:
            self._start = self._end = 0

    def _next_step(self) -> int:
        assert self._big is not None
        return min(self._big_size, GROWTH * len(self._big)) - len(self._big)

    def _grow(self, step: int, forced: bool = False) -> None:
        """Grow the large frame's buffer by `step` bytes (taken from the pool already)."""
        big = self._big
        assert big is not None
        if forced:
            self._hold(step)
        grown = bytearray(len(big) + step)
        grown[: self._big_filled] = memoryview(big)[: self._big_filled]
        self._big = grown

    def _take(self, n: int) -> bool:
        """`n` bytes from the pool for frame data; False: reading stops until the pool
        has them (then `_granted` carries on where this left off)."""
        if self._credit >= n:
            self._credit -= n
            return True
        if self._memory_wait:
            return False  # already in line: `_granted` or `_granted_room` carries on
        if self._pool.try_take(n):
            self._pool_held += n
            return True
        self._memory_wait = n
        self._pool.wait(self._granted, n, len(self._big) if self._big is not None else 0)
        self._update_reading()
        return False

    def _granted(self) -> None:
        n, self._memory_wait = self._memory_wait, 0
        self._pool_held += n
        if self._closed:
            self._release(self._pool_held)
            return
        self._credit += n
        self._update_reading()
        self._carry_on()

    def _carry_on(self) -> None:
        """Memory came: finish what waited for it (a buffer to grow, a frame to start)."""
        if self._big is not None:
            step = self._next_step()
            if self._big_filled == len(self._big) and self._take(step):
                self._grow(step)
        else:
            self._parse()

    def _hold(self, n: int) -> None:
        """Count `n` bytes that arrived whole; over the pool's bound, stop reading until
        memory returns."""
        self._pool.take(n)
        self._pool_held += n
        if self._pool.exhausted and not self._memory_wait and not self._closed:
            self._memory_wait = -1  # nothing to take: wait for the pool to have room
            self._pool.wait(self._granted_room, 0, 0)
            self._update_reading()

    def _granted_room(self) -> None:
        self._memory_wait = 0
        if not self._closed:
            self._update_reading()
            self._carry_on()

    def _release(self, n: int) -> None:
        """A frame handled (or a response written): its bytes go back to the pool."""
        n = min(n, self._pool_held)
        if n > 0:
            self._pool_held -= n
            self._pool.give(n)

    def _on_frame(self, frame: bytearray) -> None:
        loop = asyncio.get_running_loop()
        self.last_active = loop.time()
        if (self._busy or self._write_paused or self._throttled or self._queue
                or self._streaming is not None):
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
        full = (self._write_paused or self._throttled or self._memory_wait != 0
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
        size = len(frame)
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
        if not asyncio.iscoroutine(reply):
            # handled (an acks=all produce has appended): its bytes are free
            self._release(size)
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
            task.add_done_callback(lambda _t: self._release(size))
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
               and not self._throttled and not self._closed and self._streaming is None):
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
        return not self._busy and not self._queue and self._streaming is None

    def _send(self, data: bytes | bytearray | ResponseParts) -> None:
        if self.transport is None or self._closed:
            return
        self.last_active = asyncio.get_running_loop().time()
        if self._streaming is not None:
            self._outbox.append(data)  # after the response being sent, in order
        elif isinstance(data, ResponseParts):
            self._stream(data)
        else:
            self.transport.write(data)

    # ---- responses with file slices --------------------------------------------

    def _stream(self, parts: ResponseParts) -> None:
        transport = self.transport
        assert transport is not None
        if self._zero_copy and transport.get_write_buffer_size() == 0:
            writer = SendfileWriter(parts)
            try:
                if writer.write_now(transport.get_extra_info("socket").fileno()):
                    return  # all of it taken by the socket: no task needed
            except SliceCutShort as exc:
                log.warning("closing connection from %s:%d: %s", *self.peer, exc)
                self.abort()
                return
            except OSError as exc:
                log.debug("connection from %s:%d lost while sending: %s", *self.peer, exc)
                self.abort()
                return
            sending = writer.finish(transport)
        elif self._zero_copy:
            sending = send_with_sendfile(transport, parts)
        else:
            sending = send_in_chunks(transport, parts, self._wait_drained, WRITE_HIGH_WATER)
        task = self._streaming = asyncio.ensure_future(sending)
        task.add_done_callback(self._streamed)

    async def _wait_drained(self) -> None:
        if self._drained is None or self._drained.done():
            self._drained = asyncio.get_running_loop().create_future()
        await self._drained

    def _streamed(self, task: asyncio.Future[None]) -> None:
        self._streaming = None
        if task.cancelled() or self._closed:
            return
        exc = task.exception()
        if exc is not None:
            if isinstance(exc, SliceCutShort):
                log.warning("closing connection from %s:%d: %s", *self.peer, exc)
            else:
                log.debug("connection from %s:%d lost while sending: %s", *self.peer, exc)
            self.abort()
            return
        self.last_active = asyncio.get_running_loop().time()
        while self._outbox and self._streaming is None and not self._closed:
            self._send(self._outbox.popleft())
        self._drain()

    def _stop_streaming(self) -> None:
        self._outbox.clear()
        if self._streaming is not None:
            self._streaming.cancel()
            self._streaming = None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._queue.clear()
            if self._streaming is not None:
                # half a response was sent: the client cannot use the rest of the stream
                self.abort()
                return
            if self.transport is not None:
                self.transport.close()

    def abort(self) -> None:
        """Close at once, dropping what is unsent (a response cut mid-way)."""
        self._closed = True
        self._queue.clear()
        self._stop_streaming()
        if self.transport is not None:
            self.transport.abort()
