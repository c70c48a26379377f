"""ApiVersions (18): which APIs and versions this broker speaks.

Answered with response header v0 at every version so any client can read it. From v3
on, the supported and finalized features (server/features.py; the levels from the
metadata image, so a change by UpdateFeatures shows at once) ride in tagged fields,
as Kafka 4 sends them. Debian's kcat (librdkafka 2.0.2) reads them: measured here,
and tests/clients/test_kcat.py runs it against this response.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import response_class
from odradek.server import features
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
    extra: dict[str, Any] = {}
    if ctx.version >= 3:
        ctx.metrics.telemetry.note_software(ctx.client_host, ctx.client_port,
                                            request.client_software_name or "",
                                            request.client_software_version or "")
        image = ctx.metadata.image
        extra = {
            "supported_features": tuple(
                build(schema.SupportedFeatureKey, name=f.name, min_version=f.min_version,
                      max_version=f.max_version) for f in features.FEATURES),
            "finalized_features_epoch": image.features_epoch,
            # Kafka 4 reports a finalized level as min = max (KIP-778)
            "finalized_features": tuple(
                build(schema.FinalizedFeatureKey, name=name, min_version_level=level,
                      max_version_level=level) for name, level in features.finalized(image)),
        }
    return build(
        schema.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=_api_keys(schema),
        **extra,
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
