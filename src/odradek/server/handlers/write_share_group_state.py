"""WriteShareGroupState (85): a share-partition leader's state changes, merged into
what the share coordinator keeps and written to `__share_group_state` before the
answer."""

from __future__ import annotations

from typing import Any

from odradek.protocol.share_state_records import StateBatch
from odradek.server.handlers.base import ApiHandler, RequestContext
from odradek.server.handlers.share_state_common import per_partition, state_coordinator

API_KEY = 85


def handle(ctx: RequestContext, request: Any) -> Any:
    async def one(group_id: str, topic_id: Any, p: Any) -> dict[str, Any]:
        await state_coordinator(ctx).write(
            (group_id, topic_id, p.partition), p.state_epoch, p.leader_epoch, p.start_offset,
            [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
             for b in p.state_batches])
        return {}

    return per_partition(ctx, request, "WriteShareGroupStateResponse", "WriteStateResult",
                         one)


HANDLER = ApiHandler(API_KEY, 0, 1, handle)
