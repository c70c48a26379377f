"""The request pipeline: the one path every request takes, whatever its API.

frame → header → handler and version check → decode → context (who, on which
listener, the ports) → the steps every request passes (authorization, fault injection —
each a hook that costs nothing while unset) → the handler, timed and its response
throttled while client quotas are configured (quota_step.py) → the response
frame, or, if anything raised, the API's own error response (`error_responses.py`)
→ metrics. A connection is closed only when no response can be built: a frame too
short for a header, an unknown API, an unsupported version (but ApiVersions, which
answers UNSUPPORTED_VERSION), a body that does not parse, or a failed acks=0 produce
(which owes no response).

The connection (connection.py) owns the bytes and the order of responses; this
module owns what happens to one request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from odradek.protocol.errors import ErrorCode, InvalidRequest, KafkaError, UnsupportedVersion
from odradek.protocol.fetch_response import ResponseParts
from odradek.protocol.headers import peek_ids, read_request_header
from odradek.protocol.messages import (
    api_name,
    decode_request,
    encode_response,
    is_flexible_request,
)
from odradek.security.sasl.session import SaslSession
from odradek.server.error_responses import error_response
from odradek.server.handlers import HANDLERS
from odradek.server.handlers.api_versions import API_KEY as API_VERSIONS
from odradek.server.handlers.api_versions import unsupported_version_response
from odradek.server.handlers.base import (
    CLOSE_CONNECTION,
    AwaitingReplicas,
    Encoded,
    RequestContext,
)
from odradek.server.listener_security import ConnectionSecurity
from odradek.server.quota_step import Channel, QuotaStep

if TYPE_CHECKING:
    from odradek.server.authorization import RequestAuthorizer
from odradek.server.metrics import BrokerMetrics
from odradek.server.ports import Ports

log = logging.getLogger(__name__)

PRODUCE = 0
# Beyond this a request without a hand-written decoder is decoded and answered in a thread.
LARGE_REQUEST = 256 * 1024

Reply = bytes | bytearray | ResponseParts | None
"""A response frame, or None when none is owed (acks=0); CLOSE_CONNECTION drops it."""

Step = Callable[[RequestContext, Any], Any]
"""A pipeline step: given the context and the decoded request, None to go on, or what
to answer instead (a response message, a KafkaError to answer with, CLOSE_CONNECTION,
or an awaitable of one of these)."""


@dataclass(frozen=True, slots=True)
class Client:
    host: str
    port: int
    listener: str
    security: ConnectionSecurity | None = None  # who it is, once TLS or SASL says so
    channel: Channel = field(default_factory=Channel)  # the connection's throttle


class RequestPipeline:
    def __init__(self, ports: Ports, metrics: BrokerMetrics) -> None:
        self.ports = ports
        self.metrics = metrics
        # Each runs before the handler, in this order; None while not configured, so an
        # unsecured, unthrottled broker pays one attribute test per request for each.
        self.authorize: RequestAuthorizer | None = None
        self.throttle: QuotaStep | None = None  # set while any client quota is configured
        self.faults: Step | None = None

    def process(self, frame: bytearray, client: Client) -> Any:
        """A Reply, CLOSE_CONNECTION, or an awaitable of one of them (the handler waits)."""
        security = client.security
        if security is not None and security.sasl is not None and security.sasl.raw_tokens:
            return _raw_token(frame, security.sasl, client)
        try:
            api_key, version, correlation_id = peek_ids(frame)
        except InvalidRequest:
            log.warning("closing connection from %s:%d: request shorter than a header",
                        client.host, client.port)
            return CLOSE_CONNECTION
        if security is not None and security.sasl is not None and not security.sasl.allows(
                api_key, int(time.time() * 1000)):
            # Kafka: nothing but ApiVersions and the SASL exchange before a login (or once
            # a session has outlived connections.max.reauth.ms) — the connection closes
            log.warning("closing connection from %s:%d: %s before SASL authentication",
                        client.host, client.port, api_name(api_key))
            return CLOSE_CONNECTION
        handler = HANDLERS.get(api_key)
        if handler is None:
            log.warning("closing connection from %s:%d: unknown api key %d", client.host,
                        client.port, api_key)
            return CLOSE_CONNECTION
        if not handler.min_version <= version <= handler.max_version:
            if api_key == API_VERSIONS:
                v, body = unsupported_version_response()
                return encode_response(api_key, v, correlation_id, body)
            log.warning("closing connection from %s:%d: %s v%d is not supported (%d-%d)",
                        client.host, client.port, api_name(api_key), version,
                        handler.min_version, handler.max_version)
            return CLOSE_CONNECTION
        started = self.metrics.on_request(api_key)  # counts it, starts its clock
        if handler.decode is None and len(frame) > LARGE_REQUEST:
            return self._large(frame, client, api_key, version, started)
        try:
            header, request = self._decode(frame, api_key, version)
        except (InvalidRequest, UnsupportedVersion) as e:
            log.warning("closing connection from %s:%d: %s", client.host, client.port, e)
            return CLOSE_CONNECTION
        return self._handle(header, request, client, started, len(frame))

    def _decode(self, frame: bytearray, api_key: int, version: int) -> tuple[Any, Any]:
        # kio's native readers insist on read-only buffers
        view = memoryview(frame).toreadonly()
        header, offset = read_request_header(view, is_flexible_request(api_key, version))
        handler = HANDLERS[api_key]
        if handler.decode is not None:
            return header, handler.decode(frame, offset, version)
        return header, decode_request(api_key, version, view, offset)

    async def _large(self, frame: bytearray, client: Client, api_key: int, version: int,
                     started: float) -> Any:
        """A large request of an API without a fast decoder (a Metadata naming 300,000
        topics): decoding and encoding run in a thread, so the event loop keeps serving
        every other connection between the interpreter's switches instead of stalling
        for seconds."""
        loop = asyncio.get_running_loop()
        try:
            header, request = await loop.run_in_executor(None, self._decode, frame, api_key,
                                                          version)
        except (InvalidRequest, UnsupportedVersion) as e:
            log.warning("closing connection from %s:%d: %s", client.host, client.port, e)
            return CLOSE_CONNECTION
        reply = self._handle(header, request, client, started, len(frame),
                             encode_in_thread=True)
        while asyncio.iscoroutine(reply) or isinstance(reply, asyncio.Future):
            reply = await reply
        return reply

    def _handle(self, header: Any, request: Any, client: Client, started: float, size: int,
                encode_in_thread: bool = False) -> Any:
        handler = HANDLERS[header.api_key]
        security = client.security
        ctx = RequestContext(self.ports, header, client.host, client.port, client.listener,
                             security, request_size=size)
        finish = None
        throttle = self.throttle
        try:
            if self.authorize is not None:
                verdict = self.authorize(ctx, request)
                request, finish = verdict.request, verdict.finish
            result = self._steps(ctx, request)
            if result is None:
                if throttle is not None:
                    request = throttle.prepare(ctx, request)
                    begun = time.perf_counter_ns()
                    result = handler.handle(ctx, request)
                    result = self._throttled(ctx, request, result, throttle, client.channel,
                                             time.perf_counter_ns() - begun)
                else:
                    result = handler.handle(ctx, request)
        except Exception as e:
            return self._failed(ctx, request, e, started)
        if finish is not None:
            result = self._finished(result, finish)
        if isinstance(result, AwaitingReplicas):
            if encode_in_thread:
                result = result.wait
            else:  # the connection may go on with its next request (base.py)
                return AwaitingReplicas(self._later(ctx, request, result.wait, started))
        if encode_in_thread:
            return self._later(ctx, request, result, started, encode_in_thread=True)
        if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
            return self._later(ctx, request, result, started)
        return self._reply(ctx, request, result, started)

    @staticmethod
    def _throttled(ctx: RequestContext, request: Any, result: Any, throttle: QuotaStep,
                   channel: Channel, handling_ns: int) -> Any:
        """The response with its quota's throttle time; the time is the handler's own
        (not its waits), as Kafka counts a request handler thread's time."""
        if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
            async def then() -> Any:
                return throttle.finish(ctx, request, await result, handling_ns, channel)

            return then()
        return throttle.finish(ctx, request, result, handling_ns, channel)

    @staticmethod
    def _finished(result: Any, finish: Callable[[Any], Any]) -> Any:
        """The response, with what the authorization step kept from the handler added."""
        if isinstance(result, AwaitingReplicas):
            waiting = result.wait

            async def then_wait() -> Any:
                return finish(await waiting)

            return AwaitingReplicas(then_wait())
        if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
            async def then() -> Any:
                return finish(await result)

            return then()
        return finish(result)

    def _steps(self, ctx: RequestContext, request: Any) -> Any:
        if self.faults is not None:
            return self.faults(ctx, request)
        return None

    async def _later(self, ctx: RequestContext, request: Any, pending: Any,
                     started: float, encode_in_thread: bool = False) -> Any:
        try:
            result = pending
            if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                result = await result
        except asyncio.CancelledError:
            raise
        except Exception as e:
            return self._failed(ctx, request, e, started)
        if encode_in_thread and not isinstance(result, Encoded | KafkaError) \
                and result is not None and result is not CLOSE_CONNECTION:
            api_key = ctx.header.api_key
            try:
                frame = await asyncio.get_running_loop().run_in_executor(
                    None, encode_response, api_key, ctx.version, ctx.header.correlation_id,
                    result)
            except Exception as e:
                return self._failed(ctx, request, e, started)
            self.metrics.on_response(api_key, started, request, result)
            return frame
        return self._reply(ctx, request, result, started)

    def _reply(self, ctx: RequestContext, request: Any, result: Any, started: float) -> Any:
        api_key = ctx.header.api_key
        if isinstance(result, KafkaError):  # a step's refusal
            return self._failed(ctx, request, result, started)
        if result is None or result is CLOSE_CONNECTION:
            self.metrics.on_response(api_key, started, request, result)
            return result
        if isinstance(result, Encoded):
            frame: Reply = result.frame
        else:
            try:
                frame = encode_response(api_key, ctx.version, ctx.header.correlation_id, result)
            except Exception as e:
                return self._failed(ctx, request, e, started)
        self.metrics.on_response(api_key, started, request, result)
        return frame

    def _failed(self, ctx: RequestContext, request: Any, exc: BaseException,
                started: float) -> Any:
        """The API's error response for a request whose handling raised."""
        api_key, version = ctx.header.api_key, ctx.version
        self.metrics.on_error(api_key, exc)
        where = f"{api_name(api_key)} v{version} from {ctx.client_host}:{ctx.client_port}"
        if isinstance(exc, KafkaError):
            code, message = exc.code, str(exc)
            log.warning("%s failed: %s", where, exc)
        else:
            code, message = ErrorCode.unknown_server_error, "Unexpected server error"
            log.error("%s failed", where, exc_info=exc)
        if api_key == PRODUCE and getattr(request, "acks", 1) == 0:
            return CLOSE_CONNECTION  # no response is owed; Kafka closes to signal the error
        try:
            body = error_response(api_key, version, request, code, message)
            if body is not None:
                return encode_response(api_key, version, ctx.header.correlation_id, body)
        except Exception:
            log.exception("%s: could not build its error response", where)
        log.warning("%s: closing the connection (no error response for this API)", where)
        return CLOSE_CONNECTION


def _raw_token(frame: bytearray, sasl: SaslSession, client: Client) -> Any:
    """One token of a SaslHandshake v0 exchange: the frame is the mechanism's bytes, the
    answer the server's bytes, size-prefixed; a failed login closes the connection after
    connection.failed.authentication.delay.ms (v0 has no error response to carry it)."""
    result = sasl.authenticate(bytes(frame), int(time.time() * 1000))
    if result.error == ErrorCode.none:
        return len(result.auth_bytes).to_bytes(4, "big") + result.auth_bytes

    async def refused() -> Any:
        await asyncio.sleep((result.close_after_ms or 0) / 1000)
        return CLOSE_CONNECTION

    log.info("closing connection from %s:%d: SASL authentication failed", client.host,
             client.port)
    return refused()
