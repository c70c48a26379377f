"""CreateAcls (30): add ACLs; each creation gets its own result (an invalid one —
an unknown operation for its resource type, a bad principal — fails alone)."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.security.acl import validate_new_acl
from odradek.server.acl_store import binding_of, to_stored
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 30


async def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    if ctx.ports.acls is None:
        return build(schema.CreateAclsResponse, results=tuple(
            build(schema.AclCreationResult, error_code=ErrorCode.security_disabled,
                  error_message="No Authorizer is configured.") for _ in request.creations))
    rows = list(ctx.metadata.image.acls)
    results: list[tuple[ErrorCode, str | None]] = []
    for c in request.creations:
        try:
            binding = binding_of(c)
            validate_new_acl(binding)
            row = to_stored(binding)
            if row not in rows:
                rows.append(row)
            results.append((ErrorCode.none, None))
        except KafkaError as e:
            results.append((e.code, str(e)))
    if len(rows) != len(ctx.metadata.image.acls):
        await ctx.metadata.set_acls(rows)
    return build(schema.CreateAclsResponse, results=tuple(
        build(schema.AclCreationResult, error_code=code, error_message=message)
        for code, message in results))


HANDLER = ApiHandler(API_KEY, 1, 3, handle)
