"""DeleteGroups (42): remove empty groups and their offsets (tombstones in the log).

A share group is deleted as Kafka 4.x does it: NON_EMPTY_GROUP while it has members,
otherwise the share coordinator deletes each share-partition's state first
(DeleteShareGroupState), then the group goes.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.group_common import coordinator

API_KEY = 42


async def _delete_share_group(ctx: RequestContext, group_id: str) -> ErrorCode | None:
    """The share group's result, None when `group_id` is not a share group here."""
    shares = ctx.ports.shares
    if shares is None:
        return None
    try:
        if not shares.admin.is_share_group(group_id):
            return None
        await shares.delete_group(group_id)
    except KafkaError as e:
        return e.code
    return ErrorCode.none


def handle(ctx: RequestContext, request: Any) -> Any:
    async def delete() -> Any:
        results: dict[str, ErrorCode] = {}
        classic: list[str] = []
        for g in request.groups_names:
            code = await _delete_share_group(ctx, g)
            if code is None:
                classic.append(g)
            else:
                results[g] = code
        results.update(await coordinator(ctx).delete_groups(classic))
        schema = ctx.schema
        return build(schema.DeleteGroupsResponse, results=tuple(
            build(schema.DeletableGroupResult, group_id=g, error_code=results[g])
            for g in dict.fromkeys(request.groups_names)))

    return delete()


HANDLER = ApiHandler(API_KEY, 0, 2, handle)
