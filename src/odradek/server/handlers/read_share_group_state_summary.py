"""ReadShareGroupStateSummary (87): a share-partition's start offset and epochs without
its batches (what DescribeShareGroupOffsets reports)."""

from __future__ import annotations

from typing import Any

from odradek.server.handlers.base import ApiHandler, RequestContext
from odradek.server.handlers.share_state_common import per_partition, state_coordinator

API_KEY = 87


def handle(ctx: RequestContext, request: Any) -> Any:
    async def one(group_id: str, topic_id: Any, p: Any) -> dict[str, Any]:
        r = state_coordinator(ctx).summary((group_id, topic_id, p.partition))
        return {"state_epoch": r.state_epoch, "leader_epoch": r.leader_epoch,
                "start_offset": r.start_offset, "delivery_complete_count": -1}

    return per_partition(ctx, request, "ReadShareGroupStateSummaryResponse",
                         "ReadStateSummaryResult", one)


HANDLER = ApiHandler(API_KEY, 0, 1, handle)
