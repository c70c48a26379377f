"""ListTransactions (66): the transactional ids this coordinator knows, filtered.

Filters: states (Kafka's names; unknown ones are echoed back), producer ids, v1 a
minimum duration of the ongoing transaction (KIP-994), v2 a regular expression the
transactional id must match.
"""

from __future__ import annotations

from typing import Any

from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 66


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    code, unknown, found = ctx.transactions.coordinator.list_transactions(
        request.state_filters, request.producer_id_filters,
        getattr(request, "duration_filter", -1),
        getattr(request, "transactional_id_pattern", None))
    return build(
        schema.ListTransactionsResponse, error_code=code, unknown_state_filters=tuple(unknown),
        transaction_states=tuple(
            build(schema.TransactionState, transactional_id=md.transactional_id,
                  producer_id=md.producer_id, transaction_state=md.state.kafka_name)
            for md in found))


HANDLER = ApiHandler(API_KEY, 0, 2, handle)
