"""InitializeShareGroupState (83): a new state epoch for share-partitions, starting at
the given offset (the group coordinator's call when a share group starts on a
partition or its offsets are altered)."""

from __future__ import annotations

from typing import Any

from odradek.server.handlers.base import ApiHandler, RequestContext
from odradek.server.handlers.share_state_common import per_partition, state_coordinator

API_KEY = 83


def handle(ctx: RequestContext, request: Any) -> Any:
    async def one(group_id: str, topic_id: Any, p: Any) -> dict[str, Any]:
        await state_coordinator(ctx).initialize((group_id, topic_id, p.partition),
                                                p.state_epoch, p.start_offset)
        return {}

    return per_partition(ctx, request, "InitializeShareGroupStateResponse",
                         "InitializeStateResult", one)


HANDLER = ApiHandler(API_KEY, 0, 0, handle)
