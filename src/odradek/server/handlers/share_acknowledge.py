"""ShareAcknowledge (79): acknowledge records without fetching more, in the member's
share session (epoch 0 cannot open one: INVALID_SHARE_SESSION_EPOCH; -1 acknowledges,
releases what the member still holds and closes it)."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.share.sessions import FINAL_EPOCH
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build, ms
from odradek.server.handlers.share_common import acknowledge_all, check_ids, shares

API_KEY = 79


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    lock_ms = ctx.ports.shares.config.record_lock_duration_ms if ctx.ports.shares else 0

    def answer(error: KafkaError | None, results: dict[Any, KafkaError | None]) -> Any:
        topics: dict[Any, list[Any]] = {}
        for (topic_id, index), e in results.items():
            topics.setdefault(topic_id, []).append(build(
                schema.PartitionData, partition_index=index,
                error_code=e.code if e else ErrorCode.none,
                error_message=str(e) if e else None,
                current_leader=build(schema.LeaderIdAndEpoch, leader_id=ctx.node_id,
                                     leader_epoch=-1)))
        return build(schema.ShareAcknowledgeResponse,
                     error_code=error.code if error else ErrorCode.none,
                     error_message=str(error) if error else None,
                     acquisition_lock_timeout=ms(lock_ms),
                     responses=tuple(build(schema.ShareAcknowledgeTopicResponse,
                                           topic_id=t, partitions=tuple(ps))
                                     for t, ps in topics.items()),
                     node_endpoints=())

    try:
        group_id, member_id = check_ids(request.group_id, request.member_id)
        manager = shares(ctx).partitions
        manager.sessions.for_acknowledge(group_id, member_id, request.share_session_epoch)
    except KafkaError as e:
        return answer(e, {})

    async def run() -> Any:
        results = await acknowledge_all(ctx, group_id, member_id, request.topics)
        if request.share_session_epoch == FINAL_EPOCH:
            manager.release_member(group_id, member_id)
        return answer(None, results)

    return run()


HANDLER = ApiHandler(API_KEY, 1, 2, handle)
