"""IncrementalAlterConfigs (44): SET, DELETE, APPEND, SUBTRACT single configs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from odradek.protocol.errors import ErrorCode, InvalidRequest, KafkaError
from odradek.server import client_metrics
from odradek.server.configs import (
    AlterOp,
    ResourceType,
    apply_broker,
    apply_topic,
    check_broker_name,
    parse_op,
)
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.share_common import alter_group_configs

API_KEY = 44


async def alter(
    ctx: RequestContext,
    request: Any,
    *,
    incremental: bool,
    ops_of: Callable[[Any], list[tuple[str, AlterOp, str | None]]],
    response_name: str,
) -> Any:
    schema = ctx.schema
    out = []
    for res in request.resources:
        try:
            ops = ops_of(res)
            if res.resource_type == ResourceType.TOPIC:
                await apply_topic(ctx.ports, res.resource_name, ops, incremental=incremental,
                                  validate_only=request.validate_only)
            elif res.resource_type == ResourceType.BROKER:
                check_broker_name(ctx.ports, res.resource_name)
                await apply_broker(ctx.ports, ops, incremental=incremental,
                                   validate_only=request.validate_only)
            elif res.resource_type == client_metrics.RESOURCE_TYPE:
                await client_metrics.apply(ctx.ports, res.resource_name, ops,
                                           incremental=incremental,
                                           validate_only=request.validate_only)
            elif res.resource_type == ResourceType.GROUP and incremental:
                alter_group_configs(ctx, res.resource_name, ops,
                                    validate_only=request.validate_only)
            else:
                raise InvalidRequest(f"Unsupported resource type {res.resource_type}")
            code, message = ErrorCode.none, None
        except KafkaError as e:
            code, message = e.code, str(e)
        out.append(
            build(schema.AlterConfigsResourceResponse, error_code=code, error_message=message,
                  resource_type=res.resource_type, resource_name=res.resource_name)
        )
    return build(getattr(schema, response_name), responses=tuple(out))


def handle(ctx: RequestContext, request: Any) -> Any:
    return alter(
        ctx,
        request,
        incremental=True,
        ops_of=lambda res: [(c.name, parse_op(c.config_operation), c.value)
                            for c in res.configs],
        response_name="IncrementalAlterConfigsResponse",
    )


HANDLER = ApiHandler(API_KEY, 0, 1, handle)
