"""DescribeCluster (60): cluster id, controller and brokers."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 60
NO_AUTHORIZED_OPERATIONS = -2147483648


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    image = ctx.metadata.image
    include_fenced = bool(getattr(request, "include_fenced_brokers", False))
    brokers = tuple(
        build(schema.DescribeClusterBroker, broker_id=b.node_id,
              host=b.endpoint(ctx.listener)[0], port=b.endpoint(ctx.listener)[1],
              rack=b.rack, is_fenced=b.fenced)
        for b in image.brokers.values()
        if include_fenced or not b.fenced
    )
    return build(
        schema.DescribeClusterResponse,
        error_code=ErrorCode.none,
        endpoint_type=1,
        cluster_id=image.cluster_id,
        controller_id=image.controller_id,
        brokers=brokers,
        cluster_authorized_operations=NO_AUTHORIZED_OPERATIONS,
    )


HANDLER = ApiHandler(API_KEY, 0, 2, handle)
