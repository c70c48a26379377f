"""DescribeConfigs (32): topic and broker configs with their sources and synonyms."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, InvalidRequest, KafkaError
from odradek.server import client_metrics
from odradek.server.configs import (
    ConfigEntry,
    ResourceType,
    check_broker_name,
    describe_broker,
    describe_topic,
)
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.share_common import describe_group_configs

API_KEY = 32


def _entries(ctx: RequestContext, rtype: int, name: str) -> list[ConfigEntry]:
    if rtype == ResourceType.TOPIC:
        return describe_topic(ctx.ports, name)
    if rtype == ResourceType.BROKER:
        check_broker_name(ctx.ports, name)
        return describe_broker(ctx.ports)
    if rtype == ResourceType.BROKER_LOGGER:
        return []
    if rtype == client_metrics.RESOURCE_TYPE:
        return client_metrics.describe(ctx.ports, name)
    if rtype == ResourceType.GROUP:
        return describe_group_configs(ctx, name)
    raise InvalidRequest(f"Unsupported resource type {rtype}")


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    results = []
    include_synonyms = bool(getattr(request, "include_synonyms", False))
    include_docs = bool(getattr(request, "include_documentation", False))
    for res in request.resources:
        try:
            entries = _entries(ctx, res.resource_type, res.resource_name)
            keys = res.configuration_keys
            if keys is not None:
                entries = [e for e in entries if e.name in keys]
            configs = tuple(
                build(
                    schema.DescribeConfigsResourceResult,
                    name=e.name,
                    value=e.value,
                    read_only=e.read_only,
                    config_source=int(e.source),
                    is_sensitive=e.sensitive,
                    synonyms=tuple(
                        build(schema.DescribeConfigsSynonym, name=n, value=v, source=int(s))
                        for n, v, s in e.synonyms
                    ) if include_synonyms else (),
                    config_type=e.type_code,
                    documentation=e.doc if include_docs else None,
                )
                for e in entries
            )
            code, message = ErrorCode.none, None
        except KafkaError as e:
            configs, code, message = (), e.code, str(e)
        results.append(
            build(schema.DescribeConfigsResult, error_code=code, error_message=message,
                  resource_type=res.resource_type, resource_name=res.resource_name,
                  configs=configs)
        )
    return build(schema.DescribeConfigsResponse, results=tuple(results))


HANDLER = ApiHandler(API_KEY, 1, 4, handle)
