"""ApiVersions (18): which APIs and versions this broker speaks.

Answered with response header v0 at every version so any client can read it, and with
no tagged fields: librdkafka 2.0 (Debian's kcat) mis-skips non-empty ones.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import response_class
from odradek.server.handlers.base import ApiHandler, RequestContext, build, response_module

API_KEY = 18
MIN_VERSION, MAX_VERSION = 0, 4


def _api_keys(ctx_schema: Any) -> tuple[Any, ...]:
    from odradek.server.handlers import HANDLERS

    return tuple(
        build(ctx_schema.ApiVersion, api_key=h.api_key, min_version=h.min_version,
              max_version=h.max_version)
        for h in sorted(HANDLERS.values(), key=lambda h: h.api_key)
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    return build(
        schema.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=_api_keys(schema),
    )


def unsupported_version_response() -> tuple[int, Any]:
    """A v0 response telling a client that asked for a newer ApiVersions what we have."""
    schema = response_module(API_KEY, 0)
    body = build(
        response_class(API_KEY, 0),
        error_code=ErrorCode.unsupported_version,
        api_keys=_api_keys(schema),
    )
    return 0, body


HANDLER = ApiHandler(API_KEY, MIN_VERSION, MAX_VERSION, handle)
