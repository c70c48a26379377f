"""InitProducerId (22): a fresh producer id for an idempotent producer.

Without a transactional id any broker answers, and the id is new even when the client
sends its old one (KIP-360): the old id's sequences stay valid for its in-flight
retries, and the new id starts clean at epoch 0. With one, the transaction coordinator
answers: the id's producer id with its next epoch, fencing an older instance and
aborting its open transaction (coordinator/txn).
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 22


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    if request.transactional_id is not None:
        return ctx.transactions.init_producer_id(ctx, request)

    async def allocated() -> Any:
        pid = await ctx.metadata.allocate_producer_id()
        return build(schema.InitProducerIdResponse, error_code=ErrorCode.none,
                     producer_id=pid, producer_epoch=0)

    return allocated()


HANDLER = ApiHandler(API_KEY, 0, 5, handle)
