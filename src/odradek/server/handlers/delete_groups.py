"""DeleteGroups (42): remove empty groups and their offsets (tombstones in the log)."""

from __future__ import annotations

from typing import Any

from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.group_common import coordinator

API_KEY = 42


def handle(ctx: RequestContext, request: Any) -> Any:
    async def delete() -> Any:
        results = await coordinator(ctx).delete_groups(list(request.groups_names))
        schema = ctx.schema
        return build(schema.DeleteGroupsResponse, results=tuple(
            build(schema.DeletableGroupResult, group_id=g, error_code=code)
            for g, code in results.items()))

    return delete()


HANDLER = ApiHandler(API_KEY, 0, 2, handle)
