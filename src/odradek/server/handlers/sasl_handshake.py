"""SaslHandshake (17): the client names its mechanism; the listener's enabled ones answer.

Version 1: the tokens travel in SaslAuthenticate requests (KIP-152). Version 0: they
travel as raw size-prefixed frames (the request pipeline hands them to the session).
librdkafka up to 2.x enables SASL only when v0 is advertised, then uses v1. On a listener
without SASL the answer is ILLEGAL_SASL_STATE, as Kafka's.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 17


def handle(ctx: RequestContext, request: Any) -> Any:
    sasl = ctx.security.sasl if ctx.security is not None else None
    if sasl is None:
        return build(ctx.schema.SaslHandshakeResponse,
                     error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    result = sasl.handshake(request.mechanism, ctx.version)
    return build(ctx.schema.SaslHandshakeResponse, error_code=result.error,
                 mechanisms=tuple(result.mechanisms))


HANDLER = ApiHandler(API_KEY, 0, 1, handle)
