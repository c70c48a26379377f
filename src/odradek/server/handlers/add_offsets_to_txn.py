"""AddOffsetsToTxn (25): a group's offsets partition joins a producer's transaction.

What `sendOffsetsToTransaction` sends first: the `__consumer_offsets` partition of the
group becomes part of the transaction, so its marker decides the offsets the producer
then commits with TxnOffsetCommit.
"""

from __future__ import annotations

from typing import Any

from odradek.server.group_storage import OFFSETS_TOPIC
from odradek.server.handlers.base import ApiHandler, RequestContext, build
from odradek.server.txn_storage import fenced_code

API_KEY = 25


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    async def run() -> Any:
        partition = ctx.groups.partition_for(request.group_id)
        code = await ctx.transactions.coordinator.add_partitions(
            request.transactional_id, request.producer_id, request.producer_epoch,
            {(OFFSETS_TOPIC, partition)})
        return build(schema.AddOffsetsToTxnResponse, error_code=fenced_code(code, ctx.version, 2))

    return run()


HANDLER = ApiHandler(API_KEY, 0, 4, handle)
