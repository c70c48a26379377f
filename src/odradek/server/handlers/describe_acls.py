"""DescribeAcls (29): the ACLs a filter matches, grouped by resource pattern."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.security.acl import ResourcePattern, validate_filter
from odradek.server.acl_store import filter_of
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 29


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    acls = ctx.ports.acls
    if acls is None:
        return build(schema.DescribeAclsResponse, error_code=ErrorCode.security_disabled,
                     error_message="No Authorizer is configured.", resources=())
    try:
        f = filter_of(request)
        validate_filter(f)
        found = acls().acls(f)
    except KafkaError as e:
        return build(schema.DescribeAclsResponse, error_code=e.code, error_message=str(e),
                     resources=())
    grouped: dict[ResourcePattern, list[Any]] = {}
    for b in found:
        grouped.setdefault(b.pattern, []).append(build(
            schema.AclDescription, principal=b.entry.principal, host=b.entry.host,
            operation=int(b.entry.operation), permission_type=int(b.entry.permission)))
    return build(schema.DescribeAclsResponse, error_code=ErrorCode.none, error_message=None,
                 resources=tuple(
                     build(schema.DescribeAclsResource, resource_type=int(p.resource_type),
                           resource_name=p.name, pattern_type=int(p.pattern_type),
                           acls=tuple(entries))
                     for p, entries in grouped.items()))


HANDLER = ApiHandler(API_KEY, 1, 3, handle)
