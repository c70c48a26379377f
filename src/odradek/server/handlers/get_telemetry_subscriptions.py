"""GetTelemetrySubscriptions (71, KIP-714): which metrics a client should push, and how
often. A client without an instance id (null or zero) is given a new one; its
subscription comes from the `client.metrics` config resources matching it
(server/client_metrics.py, server/telemetry.py)."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.handlers.base import ApiHandler, RequestContext, build, ms
from odradek.server.telemetry import ACCEPTED_COMPRESSION

API_KEY = 71


def handle(ctx: RequestContext, request: Any) -> Any:
    telemetry = ctx.metrics.telemetry
    name, version = telemetry.software(ctx.client_host, ctx.client_port)
    attributes = {"client_id": ctx.header.client_id or "",
                  "client_software_name": name, "client_software_version": version,
                  "client_source_address": ctx.client_host,
                  "client_source_port": str(ctx.client_port)}
    instance_id, sub = telemetry.subscribe(
        request.client_instance_id, attributes, ctx.metadata.image.client_metrics)
    return build(
        ctx.schema.GetTelemetrySubscriptionsResponse,
        error_code=ErrorCode.none,
        client_instance_id=instance_id,
        subscription_id=sub.subscription_id,
        accepted_compression_types=ACCEPTED_COMPRESSION,
        push_interval=ms(sub.interval_ms),
        telemetry_max_bytes=ctx.config["telemetry.max.bytes"],
        delta_temporality=True,
        requested_metrics=sub.metrics,
    )


HANDLER = ApiHandler(API_KEY, 0, 0, handle)
