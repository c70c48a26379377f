"""ShareFetch (78): acquire records for a share group member, in its share session,
and apply the acknowledgements piggy-backed on the request (KIP-932).

The session is checked first (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH,
INVALID_REQUEST at the top level, as Kafka's SharePartitionManager.newContext), then
each partition's acknowledgements (their error in `acknowledge_error_code`), then the
session's partitions are read and what is available is acquired; with nothing to
acquire the fetch waits up to `max_wait` for an append or a released record. A fetch
at epoch -1 acknowledges, releases what the member still holds and closes the session.
A v2 fetch with IsRenewAck (KIP-1222) only acknowledges (RENEW extends the acquisition
locks): it must ask for nothing (max_wait, min_bytes, max_bytes, max_records all 0,
else INVALID_REQUEST) and acquires nothing.
"""

from __future__ import annotations

from typing import Any

from odradek.coordinator.share.manager import Fetched
from odradek.coordinator.share.sessions import FINAL_EPOCH, INITIAL_EPOCH, connection_of
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build, ms, to_ms
from odradek.server.handlers.share_common import (
    TopicIdPartition,
    acknowledge_all,
    check_ids,
    has_acks,
    shares,
    topic_id_denied,
)

API_KEY = 78


def _response(ctx: RequestContext, answers: list[Fetched],
              acks: dict[TopicIdPartition, KafkaError | None], everything: bool,
              error: KafkaError | None = None) -> Any:
    schema = ctx.schema
    by_tp = {(a.topic_id, a.index): a for a in answers}
    order = list(by_tp) + [tp for tp in acks if tp not in by_tp]
    topics: dict[Any, list[Any]] = {}
    for tp in order:
        a = by_tp.get(tp) or Fetched(*tp)
        ack_error = acks.get(tp)
        if not (everything or a.error or a.acquired or tp in acks):
            continue
        leader = build(schema.LeaderIdAndEpoch,
                       leader_id=-1 if a.error else ctx.node_id,
                       leader_epoch=a.leader_epoch)
        topics.setdefault(tp[0], []).append(build(
            schema.PartitionData, partition_index=tp[1],
            error_code=a.error.code if a.error else ErrorCode.none,
            error_message=str(a.error) if a.error else None,
            acknowledge_error_code=ack_error.code if ack_error else ErrorCode.none,
            acknowledge_error_message=str(ack_error) if ack_error else None,
            current_leader=leader, records=a.records,
            acquired_records=tuple(build(schema.AcquiredRecords,
                                         first_offset=r.first_offset,
                                         last_offset=r.last_offset,
                                         delivery_count=r.delivery_count)
                                   for r in a.acquired)))
    lock_ms = ctx.ports.shares.config.record_lock_duration_ms if ctx.ports.shares else 0
    return build(schema.ShareFetchResponse,
                 error_code=error.code if error else ErrorCode.none,
                 error_message=str(error) if error else None,
                 acquisition_lock_timeout=ms(lock_ms),
                 responses=tuple(build(schema.ShareFetchableTopicResponse, topic_id=t,
                                       partitions=tuple(ps)) for t, ps in topics.items()),
                 node_endpoints=())


def handle(ctx: RequestContext, request: Any) -> Any:
    epoch = request.share_session_epoch
    try:
        group_id, member_id = check_ids(request.group_id, request.member_id)
        if getattr(request, "is_renew_ack", False) and (
                to_ms(request.max_wait) or request.min_bytes or request.max_bytes
                or request.max_records):
            raise KafkaError("a renew acknowledgement fetch must not fetch",
                             ErrorCode.invalid_request)
        manager = shares(ctx).partitions
        # closing (epoch -1), a partition may come only to carry acknowledgements
        add = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions
               if epoch != FINAL_EPOCH or not p.acknowledgement_batches]
        forget = [(t.topic_id, i) for t in request.forgotten_topics_data for i in t.partitions]
        session = manager.sessions.for_fetch(group_id, member_id, epoch, add, forget,
                                             has_acks(request.topics))
        if epoch == INITIAL_EPOCH:
            session.connection = connection_of(ctx.listener, ctx.client_host,
                                               ctx.client_port)
    except KafkaError as e:
        return _response(ctx, [], {}, False, e)
    return _fetch(ctx, request, group_id, member_id, session)


async def _fetch(ctx: RequestContext, request: Any, group_id: str, member_id: str,
                 session: Any) -> Any:
    epoch = request.share_session_epoch
    manager = shares(ctx).partitions
    acks = await acknowledge_all(ctx, group_id, member_id, request.topics)
    if epoch == FINAL_EPOCH:
        manager.release_member(group_id, member_id)
        return _response(ctx, [], acks, False)
    if getattr(request, "is_renew_ack", False):
        return _response(ctx, [], acks, False)
    max_records = request.max_records if request.max_records > 0 else 2**31 - 1
    denied = [Fetched(tp[0], tp[1], error=e) for tp in session.partitions
              if (e := topic_id_denied(ctx, tp[0])) is not None]
    tps = [tp for tp in session.partitions if tp not in {(d.topic_id, d.index)
                                                          for d in denied}]
    await manager.load(group_id, tps)
    answers, acquired = manager.acquire(group_id, member_id, tps, request.max_bytes,
                                        max_records)
    answers += denied
    manager.count_fetch(answers)
    max_wait_ms = to_ms(request.max_wait)
    if acquired or max_wait_ms <= 0 or not tps or any(a.error for a in answers):
        return _response(ctx, answers, acks, epoch == INITIAL_EPOCH)
    await manager.waiter(group_id, tps).wait(max_wait_ms / 1000)
    if manager.sessions.get(group_id, member_id) is not session:
        return _response(ctx, [], acks, False)  # closed or replaced meanwhile
    await manager.load(group_id, tps)
    again, _ = manager.acquire(group_id, member_id, tps, request.max_bytes, max_records)
    return _response(ctx, again + denied, acks, epoch == INITIAL_EPOCH)


HANDLER = ApiHandler(API_KEY, 1, 2, handle)
