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
from odradek.server.handlers.base import ApiHandler, RequestContext, build, to_ms
from odradek.server.txn_storage import fenced_code

API_KEY = 22


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    if request.transactional_id is not None:
        return _transactional(ctx, request)

    async def allocated() -> Any:
        pid = await ctx.metadata.allocate_producer_id()
        return build(schema.InitProducerIdResponse, error_code=ErrorCode.none,
                     producer_id=pid, producer_epoch=0)

    return allocated()


async def _transactional(ctx: RequestContext, request: Any) -> Any:
    pid = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if (pid < 0) != (epoch < 0):
        code, new_pid, new_epoch = ErrorCode.invalid_request, -1, -1
    else:
        code, new_pid, new_epoch = await ctx.transactions.coordinator.init_producer_id(
            request.transactional_id, to_ms(request.transaction_timeout),
            None if pid < 0 else (pid, epoch))
    return build(ctx.schema.InitProducerIdResponse,
                 error_code=fenced_code(code, ctx.version, 4),
                 producer_id=new_pid, producer_epoch=new_epoch)


HANDLER = ApiHandler(API_KEY, 0, 5, handle)
