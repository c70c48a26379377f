"""ListConfigResources (74; ListClientMetricsResources before Kafka 4.1, KIP-1142).

v0 lists the `client.metrics` subscriptions. v1 lists the config resources of the
asked types (none asked: every type): client-metrics subscriptions, topics, this
broker (as BROKER and BROKER_LOGGER, by id) and groups with configs — odradek keeps no
group configs, so none. A type that has no configs in Kafka is INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, InvalidRequest
from odradek.server.client_metrics import RESOURCE_TYPE as CLIENT_METRICS
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 74
TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
_TYPES = (CLIENT_METRICS, TOPIC, BROKER, BROKER_LOGGER, GROUP)


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    wanted = tuple(getattr(request, "resource_types", ()) or ())
    if ctx.version == 0:
        wanted = (CLIENT_METRICS,)
    unknown = [t for t in wanted if t not in _TYPES]
    if unknown:
        raise InvalidRequest(f"Unsupported resource types: {unknown}")
    chosen = set(wanted or _TYPES)
    image = ctx.metadata.image
    found: list[tuple[str, int]] = []
    if CLIENT_METRICS in chosen:
        found += [(name, CLIENT_METRICS) for name in sorted(image.client_metrics)]
    if BROKER_LOGGER in chosen:
        found.append((str(ctx.node_id), BROKER_LOGGER))
    if BROKER in chosen:
        found += [(str(b), BROKER) for b in sorted(image.brokers)]
    if TOPIC in chosen:
        found += [(name, TOPIC) for name in sorted(image.topics)]
    return build(schema.ListConfigResourcesResponse, error_code=ErrorCode.none,
                 config_resources=tuple(
                     build(schema.ConfigResource, resource_name=name, resource_type=rtype)
                     for name, rtype in found))


HANDLER = ApiHandler(API_KEY, 0, 1, handle)
