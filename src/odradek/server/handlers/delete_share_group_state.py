"""DeleteShareGroupState (86): forget share-partitions' state (tombstones in
`__share_group_state`), as deleting a share group or its offsets does."""

from __future__ import annotations

from typing import Any

from odradek.server.handlers.base import ApiHandler, RequestContext
from odradek.server.handlers.share_state_common import per_partition, state_coordinator

API_KEY = 86


def handle(ctx: RequestContext, request: Any) -> Any:
    async def one(group_id: str, topic_id: Any, p: Any) -> dict[str, Any]:
        await state_coordinator(ctx).delete((group_id, topic_id, p.partition))
        return {}

    return per_partition(ctx, request, "DeleteShareGroupStateResponse", "DeleteStateResult",
                         one)


HANDLER = ApiHandler(API_KEY, 0, 0, handle)
