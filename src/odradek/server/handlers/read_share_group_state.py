"""ReadShareGroupState (84): a share-partition's start offset and state batches, read
by its (new) leader; a leader epoch older than one already seen is fenced."""

from __future__ import annotations

from typing import Any

from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.handlers.share_state_common import per_partition, state_coordinator

API_KEY = 84


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema

    async def one(group_id: str, topic_id: Any, p: Any) -> dict[str, Any]:
        r = state_coordinator(ctx).read((group_id, topic_id, p.partition), p.leader_epoch)
        return {"state_epoch": r.state_epoch, "start_offset": r.start_offset,
                "state_batches": tuple(build(
                    schema.StateBatch, first_offset=b.first_offset, last_offset=b.last_offset,
                    delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                    for b in r.batches)}

    return per_partition(ctx, request, "ReadShareGroupStateResponse", "ReadStateResult",
                         one)


HANDLER = ApiHandler(API_KEY, 0, 0, handle)
