"""WriteTxnMarkers (27): write COMMIT/ABORT markers as the partitions' leader.

A transaction coordinator sends it to the leaders of its transaction's partitions; the
admin tools send it to abort a hanging transaction (kafka-transactions.sh abort, and
`odradek transactions abort`). Written here exactly as the local coordinator writes
them (server/txn_storage.py `LocalMarkers`).
"""

from __future__ import annotations

from typing import Any

from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 27


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    markers = ctx.transactions.markers
    results = []
    for m in request.markers:
        topics = []
        for t in m.topics:
            parts = tuple(
                build(schema.WritableTxnMarkerPartitionResult, partition_index=p,
                      error_code=markers.write(m.producer_id, m.producer_epoch,
                                               m.coordinator_epoch, m.transaction_result,
                                               (t.name, p)))
                for p in t.partition_indexes)
            topics.append(build(schema.WritableTxnMarkerTopicResult, name=t.name,
                                partitions=parts))
        results.append(build(schema.WritableTxnMarkerResult, producer_id=m.producer_id,
                             topics=tuple(topics)))
    return build(schema.WriteTxnMarkersResponse, markers=tuple(results))


HANDLER = ApiHandler(API_KEY, 1, 2, handle)
