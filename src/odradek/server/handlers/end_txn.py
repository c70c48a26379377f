"""EndTxn (26): commit or abort a producer's transaction.

Answered once the decision is in `__transaction_state` and the markers are written
(with one broker they are local appends; a partition that cannot take its marker yet
is retried in the background — the decision stands either way).
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.txn_storage import fenced_code

API_KEY = 26


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    coordinator = ctx.transactions.coordinator

    async def run() -> Any:
        code = await coordinator.end_txn(request.transactional_id, request.producer_id,
                                         request.producer_epoch, request.committed)
        # v5 answers with the producer's id and epoch (KIP-890 bumps them per
        # transaction; transaction version 1 keeps them)
        pid, epoch = (request.producer_id, request.producer_epoch) \
            if code == ErrorCode.none else (-1, -1)
        return build(schema.EndTxnResponse, error_code=fenced_code(code, ctx.version, 2),
                     producer_id=pid, producer_epoch=epoch)

    return run()


HANDLER = ApiHandler(API_KEY, 0, 5, handle)
