"""PushTelemetry (72, KIP-714): a client's metrics, in OTLP, exported on the broker's
Prometheus endpoint. Refusals as Kafka's ClientMetricsManager answers them: an unknown
instance or stale subscription id (UNKNOWN_SUBSCRIPTION_ID), a push before half its
interval (THROTTLING_QUOTA_EXCEEDED), a codec not offered
(UNSUPPORTED_COMPRESSION_TYPE), a payload over `telemetry.max.bytes`
(TELEMETRY_TOO_LARGE), bytes that do not decode (INVALID_RECORD)."""

from __future__ import annotations

import logging
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 72
log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: Any) -> Any:
    code, message = ctx.metrics.telemetry.push(
        request.client_instance_id, request.subscription_id, request.terminating,
        request.compression_type, request.metrics, ctx.config["telemetry.max.bytes"])
    if code != ErrorCode.none:
        log.info("telemetry push from %s refused: %s (%s)", ctx.header.client_id, message,
                 code.name)
    return build(ctx.schema.PushTelemetryResponse, error_code=code)


HANDLER = ApiHandler(API_KEY, 0, 0, handle)
