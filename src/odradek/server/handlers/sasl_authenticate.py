"""SaslAuthenticate (36): one round of the mechanism's exchange (KIP-152).

A failed login is answered after `connection.failed.authentication.delay.ms` (Kafka's
brake on password guessing) and the connection is closed right after; a login that
succeeds reports `session_lifetime_ms` (v1+) when `connections.max.reauth.ms` is set,
and the client re-authenticates on the same connection before it runs out (KIP-368).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.handlers.base import ZERO_MS, ApiHandler, RequestContext, build, ms

API_KEY = 36


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    security = ctx.security
    sasl = security.sasl if security is not None else None
    if security is None or sasl is None:
        return build(schema.SaslAuthenticateResponse, error_code=ErrorCode.illegal_sasl_state,
                     error_message="SASL is not enabled on this listener", auth_bytes=b"",
                     session_lifetime=ZERO_MS)
    result = sasl.authenticate(bytes(request.auth_bytes), int(time.time() * 1000))
    response = build(schema.SaslAuthenticateResponse, error_code=result.error,
                     error_message=result.error_message, auth_bytes=result.auth_bytes,
                     session_lifetime=ms(result.session_lifetime_ms))
    if result.close_after_ms is None:
        return response

    async def refused() -> Any:
        await asyncio.sleep(result.close_after_ms / 1000 if result.close_after_ms else 0)
        security.close_after_ms = 0  # the connection closes once this is sent
        return response

    return refused()


HANDLER = ApiHandler(API_KEY, 0, 2, handle)
