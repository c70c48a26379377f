"""Accepting connections ourselves, so that running out of descriptors sheds new
connections with a log line instead of closing the listener.

uvloop (libuv) hides EMFILE behind a spare descriptor while it can; when it cannot
(another thread took the spare, or the system table is full: ENFILE), it closes the
listening server, silently: from then on no client can connect and nothing says why.
Here the listening socket is ours: each accepted socket is handed to the loop with
`connect_accepted_socket`, and on EMFILE/ENFILE a reserve of descriptors is let go
to accept and close the waiting connections (the client sees a reset and
retries; Kafka's acceptor also closes what it cannot serve), then taken back. The
warning is rate-limited and names the limit; existing connections are untouched.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable

from odradek.storage.descriptors import DescriptorReserve, ExhaustionWarnings, is_exhausted

log = logging.getLogger(__name__)

ACCEPTS_PER_WAKEUP = 64  # then let the loop serve what it accepted
RETRY_WITHOUT_SPARE_S = 1.0  # no spare to shed with: listen again after this (as asyncio)


class Acceptor:
    """A listening socket served by `add_reader`; the subset of asyncio.Server the
    broker uses (start_serving, close, wait_closed, sockets)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                 protocol_factory: Callable[[], asyncio.BaseProtocol],
                 ssl_context: ssl.SSLContext | None, warnings: ExhaustionWarnings,
                 reserve: DescriptorReserve) -> None:
        self._loop = loop
        self._sock = sock
        self._factory = protocol_factory
        self._ssl = ssl_context
        self._warnings = warnings
        self._reserve = reserve
        self._serving = False
        self._handshakes: set[asyncio.Task[object]] = set()
        self.shed = 0  # connections closed at once for want of descriptors

    @property
    def sockets(self) -> list[socket.socket]:
        return [self._sock]

    async def start_serving(self) -> None:
        if not self._serving and self._sock.fileno() >= 0:
            self._serving = True
            self._loop.add_reader(self._sock.fileno(), self._on_readable)

    def close(self) -> None:
        if self._serving:
            self._loop.remove_reader(self._sock.fileno())
            self._serving = False
        self._sock.close()
        for task in self._handshakes:
            task.cancel()

    async def wait_closed(self) -> None:
        if self._handshakes:
            await asyncio.gather(*self._handshakes, return_exceptions=True)

    def _on_readable(self) -> None:
        for _ in range(ACCEPTS_PER_WAKEUP):
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                if is_exhausted(exc):
                    self._exhausted(exc)
                else:
                    log.error("accept on %s failed: %s", self._sock.getsockname(), exc)
                return
            self._adopt(conn)

    def _adopt(self, conn: socket.socket) -> None:
        conn.setblocking(False)
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = self._loop.create_task(
                self._loop.connect_accepted_socket(self._factory, conn, ssl=self._ssl))
        except OSError as exc:
            # e.g. the loop's own bookkeeping ran out of descriptors (epoll, TLS)
            conn.close()
            if is_exhausted(exc):
                self._warnings.refused("new connections shed", exc)
            return
        self._handshakes.add(task)
        task.add_done_callback(lambda t: self._handshaken(t, conn))

    def _handshaken(self, task: asyncio.Task[object], conn: socket.socket) -> None:
        self._handshakes.discard(task)
        if task.cancelled():
            conn.close()
            return
        exc = task.exception()
        if exc is not None:
            conn.close()
            if is_exhausted(exc):
                self._warnings.refused("new connections shed", exc)  # type: ignore[arg-type]
            else:
                log.debug("connection set-up failed: %s", exc)

    def _exhausted(self, exc: OSError) -> None:
        """Shed the connections waiting now, with the reserve of descriptors let go."""
        shed = 0
        with self._reserve.released() as freed:
            while freed and shed < ACCEPTS_PER_WAKEUP:
                try:
                    conn, _ = self._sock.accept()
                except OSError:
                    break
                conn.close()
                shed += 1
        self.shed += shed
        for _ in range(max(shed, 1)):
            self._warnings.refused("new connections shed", exc)
        if shed == 0:
            # nothing to shed with: stop listening for a moment rather than spin
            self._loop.remove_reader(self._sock.fileno())
            self._loop.call_later(RETRY_WITHOUT_SPARE_S, self._listen_again)

    def _listen_again(self) -> None:
        if self._serving and self._sock.fileno() >= 0:
            self._reserve.refill()
            self._loop.add_reader(self._sock.fileno(), self._on_readable)


def listening_sockets(host: str | None, port: int, backlog: int) -> list[socket.socket]:
    """Non-blocking listening TCP sockets on every address of `host` (no host: 0.0.0.0
    and ::), as `create_server` binds them: one socket per address, IPv6 ones IPv6
    only (so an IPv4 client's address stays IPv4 for ACLs and quotas), all on the port
    the first one got when `port` is 0."""
    if host:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
        addresses = list(dict.fromkeys((info[0], str(info[4][0])) for info in infos))
    else:
        addresses = [(socket.AF_INET, "0.0.0.0")]
        if socket.has_ipv6:
            addresses.append((socket.AF_INET6, "::"))
    sockets: list[socket.socket] = []
    try:
        for family, address in addresses:
            try:
                sockets.append(_listen(family, address, port, backlog))
            except OSError:
                if not sockets or host:
                    raise
                continue  # no IPv6 on this machine: IPv4 alone, as create_server does
            port = sockets[0].getsockname()[1]
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _listen(family: int, address: str, port: int, backlog: int) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((address, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock
