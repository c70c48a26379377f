"""DeleteAcls (31): remove every ACL each filter matches; the result lists them."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.security.acl import validate_filter
from odradek.server.acl_store import filter_of, to_stored
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 31


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    acls = ctx.ports.acls
    if acls is None:
        return build(schema.DeleteAclsResponse, filter_results=tuple(
            build(schema.DeleteAclsFilterResult, error_code=ErrorCode.security_disabled,
                  error_message="No Authorizer is configured.", matching_acls=())
            for _ in request.filters))
    rows = list(ctx.metadata.image.acls)
    results = []
    for raw in request.filters:
        try:
            f = filter_of(raw)
            validate_filter(f)
        except KafkaError as e:
            results.append(build(schema.DeleteAclsFilterResult, error_code=e.code,
                                 error_message=str(e), matching_acls=()))
            continue
        matched = [b for b in acls().acls(f) if to_stored(b) in rows]
        for b in matched:
            rows.remove(to_stored(b))
        results.append(build(schema.DeleteAclsFilterResult, error_code=ErrorCode.none,
                             error_message=None, matching_acls=tuple(
                                 build(schema.DeleteAclsMatchingAcl, error_code=ErrorCode.none,
                                       error_message=None,
                                       resource_type=int(b.pattern.resource_type),
                                       resource_name=b.pattern.name,
                                       pattern_type=int(b.pattern.pattern_type),
                                       principal=b.entry.principal, host=b.entry.host,
                                       operation=int(b.entry.operation),
                                       permission_type=int(b.entry.permission))
                                 for b in matched)))
    if len(rows) != len(ctx.metadata.image.acls):
        await ctx.metadata.set_acls(rows)
    return build(schema.DeleteAclsResponse, filter_results=tuple(results))


HANDLER = ApiHandler(API_KEY, 1, 3, handle)
