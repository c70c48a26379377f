"""DescribeTransactions (65): a transactional id's state, as kafka-transactions.sh shows it."""

from __future__ import annotations

import datetime
from typing import Any

from odradek.server.handlers.base import ApiHandler, RequestContext, build, ms

API_KEY = 65


def _time(ms_since_epoch: int) -> datetime.datetime:
    """kio writes this int64 from a datetime, -1 (no transaction open) included, as
    Kafka sends it (kio's own reader refuses negative ones: cli/transactions.py
    reads this response by hand)."""
    return datetime.datetime.fromtimestamp(ms_since_epoch / 1000, tz=datetime.UTC)


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    coordinator = ctx.transactions.coordinator
    states = []
    for tid in request.transactional_ids:
        code, md = coordinator.describe(tid)
        if md is None:
            states.append(build(schema.TransactionState, error_code=code, transactional_id=tid,
                                transaction_state="", transaction_timeout=ms(0),
                                transaction_start_time=_time(0), producer_id=-1,
                                producer_epoch=-1, topics=()))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(md.partitions):
            by_topic.setdefault(topic, []).append(partition)
        states.append(build(
            schema.TransactionState, error_code=code, transactional_id=tid,
            transaction_state=md.state.kafka_name, transaction_timeout=ms(md.timeout_ms),
            transaction_start_time=_time(md.start_ms),
            producer_id=md.producer_id, producer_epoch=md.producer_epoch,
            topics=tuple(build(schema.TopicData, topic=t, partitions=tuple(ps))
                         for t, ps in by_topic.items())))
    return build(schema.DescribeTransactionsResponse, transaction_states=tuple(states))


HANDLER = ApiHandler(API_KEY, 0, 0, handle)
