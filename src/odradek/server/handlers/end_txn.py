"""EndTxn (26): commit or abort a producer's transaction.

Answered once the decision is in `__transaction_state` and the markers are written
(with one broker they are local appends; a partition that cannot take its marker yet
is retried in the background — the decision stands either way).

v5 is transaction version 2 (KIP-890 part 2), chosen by the client's request version
as Kafka chooses it: the end bumps the producer's epoch (or, when the epochs are used
up, moves it to a new producer id), the markers carry the new epoch, and the answer
names the id and epoch the producer goes on with.
"""

from __future__ import annotations

from typing import Any

from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.txn_storage import fenced_code

API_KEY = 26
FIRST_TV2 = 5


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    coordinator = ctx.transactions.coordinator

    async def run() -> Any:
        code, pid, epoch = await coordinator.end_transaction(
            request.transactional_id, request.producer_id, request.producer_epoch,
            request.committed, client_transaction_version=2 if ctx.version >= FIRST_TV2 else 0)
        if ctx.version < FIRST_TV2:
            pid, epoch = -1, -1
        return build(schema.EndTxnResponse, error_code=fenced_code(code, ctx.version, 2),
                     producer_id=pid, producer_epoch=epoch)

    return run()


HANDLER = ApiHandler(API_KEY, 0, 5, handle)
