"""A broker's connection to another broker: Kafka requests over one TCP stream.

One request in flight at a time (a fetcher waits for each answer before the next), so
responses are matched by order and checked by correlation id. The framing is
protocol/client_framing.py's (requests built with kio; responses read into buffers of
their own by frame_stream.py, then decoded by kio, whose native reader hands the
records out as bytes without looking inside them).

Over the inter-broker listener the channel speaks what that listener wants: TLS with
the broker's own context (truststore to verify, keystore as the client certificate)
and SASL (SaslHandshake v1, then SaslAuthenticate rounds) with a client the broker
made from its own login, before the first request.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from odradek.protocol.client_framing import ClientFraming, CorrelationMismatch, decode_response
from odradek.protocol.errors import KafkaError
from odradek.protocol.messages import request_class
from odradek.replication.frame_stream import FrameStream

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
HANDSHAKE_VERSION, AUTHENTICATE_VERSION = 1, 1


class SaslClient(Protocol):
    """One login's client side (odradek.security.sasl.client)."""

    mechanism: str
    complete: bool

    def first(self) -> bytes: ...

    def evaluate(self, challenge: bytes) -> bytes: ...


@dataclass(frozen=True)
class ChannelSecurity:
    """How to reach other brokers: TLS context (None: plain TCP) and a SASL login
    (None: no SASL); the broker builds it from its inter-broker listener's settings."""

    ssl_context: ssl.SSLContext | None = None
    sasl: Callable[[], SaslClient] | None = None
    listener: str = "PLAINTEXT"


class ChannelAuthenticationError(ConnectionError):
    """The other broker refused our login (retried as any broken connection is)."""


class BrokerChannel:
    def __init__(self, host: str, port: int, client_id: str, timeout_s: float,
                 receive_buffer_bytes: int = -1, security: ChannelSecurity | None = None
                 ) -> None:
        self.security = security or ChannelSecurity()
        self.receive_buffer_bytes = receive_buffer_bytes  # -1: the OS's (autotuned)
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._stream: FrameStream | None = None
        self._framing = ClientFraming(client_id)
        # KIP-368: a session the other broker will end (connections.max.reauth.ms) is
        # replaced by a new login before that, at 85% of its lifetime as Kafka's clients
        self._session_ends: float | None = None

    @property
    def connected(self) -> bool:
        stream = self._stream
        return stream is not None and stream.transport is not None and \
            not stream.transport.is_closing()

    async def connect(self) -> None:
        self._stream = await asyncio.wait_for(self._open(), self.timeout_s)
        if self.security.sasl is not None:
            try:
                await asyncio.wait_for(self._authenticate(self.security.sasl()), self.timeout_s)
            except BaseException:
                self.close()
                raise

    async def _authenticate(self, client: SaslClient) -> None:
        handshake = await self._call(SASL_HANDSHAKE, HANDSHAKE_VERSION, request_class(
            SASL_HANDSHAKE, HANDSHAKE_VERSION)(mechanism=client.mechanism))
        if handshake.error_code:
            raise ChannelAuthenticationError(
                f"{self.host}:{self.port} does not take SASL {client.mechanism} (error "
                f"{int(handshake.error_code)}; it offers {list(handshake.mechanisms)})")
        authenticate = request_class(SASL_AUTHENTICATE, AUTHENTICATE_VERSION)
        try:
            token = client.first()
            while True:
                answer = await self._call(SASL_AUTHENTICATE, AUTHENTICATE_VERSION,
                                          authenticate(auth_bytes=token))
                if answer.error_code:
                    raise ChannelAuthenticationError(
                        f"{self.host}:{self.port} refused our SASL {client.mechanism} login: "
                        f"{answer.error_message or int(answer.error_code)}")
                token = client.evaluate(bytes(answer.auth_bytes or b""))
                if client.complete:
                    lifetime = getattr(answer, "session_lifetime", None)
                    seconds = lifetime.total_seconds() if lifetime is not None else 0.0
                    if seconds > 0:
                        self._session_ends = asyncio.get_running_loop().time() + seconds * 0.85
                    return
        except KafkaError as e:  # the server's answer did not check out
            raise ChannelAuthenticationError(str(e)) from None

    async def _open(self) -> FrameStream:
        tls: dict[str, Any] = {}
        if self.security.ssl_context is not None:
            tls = {"ssl": self.security.ssl_context, "server_hostname": self.host}
        loop = asyncio.get_running_loop()
        if self.receive_buffer_bytes <= 0:
            _, stream = await loop.create_connection(FrameStream, self.host, self.port, **tls)
            return stream
        # SO_RCVBUF before connecting, so that the window it implies is negotiated
        family, kind, proto, _, address = (await loop.getaddrinfo(
            self.host, self.port, type=socket.SOCK_STREAM))[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)
            await loop.sock_connect(sock, address)
            _, stream = await loop.create_connection(FrameStream, sock=sock, **tls)
            return stream
        except BaseException:
            with contextlib.suppress(OSError):
                sock.close()
            raise

    def close(self) -> None:
        if self._stream is not None and self._stream.transport is not None:
            self._stream.transport.close()
        self._stream = None
        self._session_ends = None

    async def call(self, api_key: int, version: int, body: Any,
                   extra_wait_s: float = 0.0) -> Any:
        """Send one request and decode its response; raises OSError-like errors (and
        closes) when the connection breaks or the answer is late."""
        if self._session_ends is not None and \
                asyncio.get_running_loop().time() >= self._session_ends:
            self.close()  # log in again rather than be cut off mid-request
        if not self.connected:
            await self.connect()
        return await self._call(api_key, version, body, extra_wait_s)

    async def _call(self, api_key: int, version: int, body: Any,
                    extra_wait_s: float = 0.0) -> Any:
        stream = self._stream
        assert stream is not None and stream.transport is not None
        correlation_id, request = self._framing.request(api_key, version, body)
        try:
            stream.transport.write(request)
            frame = await asyncio.wait_for(stream.read_frame(), self.timeout_s + extra_wait_s)
        except BaseException:
            self.close()
            raise
        try:
            # kio reads read-only buffers only; the view shares the frame, copying nothing
            return decode_response(api_key, version, memoryview(frame).toreadonly(),
                                   correlation_id)
        except CorrelationMismatch:
            self.close()
            raise
