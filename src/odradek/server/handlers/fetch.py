"""Fetch (1): read record batches, long-polling until `min_bytes` arrive or `max_wait` ends.

Consumers' fetches are sessionless: we answer every one in full and return session id
0, which tells clients that use fetch sessions (KIP-227) to keep sending full requests.
Followers' fetches use incremental sessions (replication/fetch_session.py): after the
first, a fetch names only what changed and the answer holds only what is new, so a
round costs the same with 10,000 idle partitions as with one.

Only the leader serves fetches, consumers' and followers' alike (NOT_LEADER_OR_FOLLOWER
elsewhere), and a partition's `current_leader_epoch` is checked as KIP-320 says. A
fetch with a replica id (v15+: in `replica_state`) is a follower's: it reads up to the
log end and moves the follower's position, the high watermark and the ISR.

Records are never read here: each partition's are a slice of its segment file
(storage's FileRecords) and the response is `ResponseParts`, the encoded bytes around
the slices; the connection sends the slices from the files (connection.py).
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError, UnknownTopicId
from odradek.protocol.fetch_response import FetchedPartition, encode_fetch_parts
from odradek.replication.fetch_session import ReplicaFetchSession, SessionKey
from odradek.replication.purgatory import DelayedFetch
from odradek.replication.replica_manager import Partition, PartitionRead
from odradek.server.handlers.base import ApiHandler, Encoded, RequestContext, to_ms

API_KEY = 1
READ_COMMITTED = 1


def replica_id_of(request: Any) -> int:
    state = getattr(request, "replica_state", None)
    if state is not None:
        return int(state.replica_id)
    return int(getattr(request, "replica_id", -1))


def _wanted(ctx: RequestContext, request: Any, from_followers: bool = False
            ) -> list[tuple[Any, int, Any]]:
    """[(topic key, partition index, (partition|None, error|None, offset, max_bytes))]."""
    image = ctx.metadata.image
    find = ctx.replicas.get_readable if from_followers else ctx.replicas.get_leader
    out = []
    for t in request.topics:
        topic_id = getattr(t, "topic_id", None)
        if topic_id is not None:
            info = image.topic_by_id(topic_id)
            name = info.name if info else None
            key = topic_id
        else:
            name = t.topic
            key = name
        for p in t.partitions:
            partition: Partition | None = None
            error: KafkaError | None = None
            if name is None:
                error = UnknownTopicId(f"unknown topic id {topic_id}")
            elif ctx.topic_denied is not None and ctx.topic_denied(name):
                error = KafkaError("Topic authorization failed.",
                                   ErrorCode.topic_authorization_failed)
            else:
                try:
                    partition = find(
                        name, p.partition, getattr(p, "current_leader_epoch", -1))
                except KafkaError as e:
                    error = e
            out.append((key, p.partition, (partition, error, p.fetch_offset,
                                            p.partition_max_bytes)))
    return out


def _response(ctx: RequestContext, wanted: list[Any], reads: list[PartitionRead]) -> Encoded:
    by_topic: dict[Any, list[FetchedPartition]] = {}
    for (key, index, _), r in zip(wanted, reads, strict=True):
        by_topic.setdefault(key, []).append(
            FetchedPartition(
                index=index,
                error_code=int(r.error.code) if r.error else 0,
                high_watermark=r.high_watermark,
                last_stable_offset=r.last_stable_offset,
                log_start_offset=r.log_start_offset,
                records=r.records,
                aborted_transactions=r.aborted,
                preferred_read_replica=r.preferred_read_replica,
            )
        )
    return Encoded(encode_fetch_parts(ctx.version, ctx.header.correlation_id,
                                         list(by_topic.items())))


def _session_response(ctx: RequestContext, session: ReplicaFetchSession,
                      reads: dict[SessionKey, PartitionRead]) -> Encoded:
    by_topic: dict[Any, list[FetchedPartition]] = {}
    for (key, index), r in reads.items():
        by_topic.setdefault(key, []).append(FetchedPartition(
            index=index, error_code=int(r.error.code) if r.error else 0,
            high_watermark=r.high_watermark, last_stable_offset=r.last_stable_offset,
            log_start_offset=r.log_start_offset, records=r.records))
    return Encoded(encode_fetch_parts(ctx.version, ctx.header.correlation_id,
                                         list(by_topic.items()), session_id=session.id))


def _session_error(ctx: RequestContext, code: ErrorCode) -> Encoded:
    return Encoded(encode_fetch_parts(ctx.version, ctx.header.correlation_id, [],
                                         error_code=int(code)))


def _order(session: ReplicaFetchSession, named: list[SessionKey]) -> list[SessionKey]:
    seen = set(named)
    return [*(k for k in session.dirty if k not in seen), *named]


def handle_replica_session(ctx: RequestContext, request: Any, replica_id: int) -> Any:
    """A follower's fetch in a session: epoch 0 starts one (a full fetch), a later
    epoch names the changes since the previous fetch (KIP-227)."""
    replicas = ctx.replicas
    sessions = replicas.fetch_sessions
    session_id, epoch = request.session_id, request.session_epoch
    full = epoch == 0
    if full:
        if session_id:
            sessions.close(session_id)
        session = sessions.create(replica_id)
        if session is None:  # no room: answer this one without a session
            return None
    else:
        found = sessions.get(session_id)
        if found is None:
            return _session_error(ctx, ErrorCode.fetch_session_id_not_found)
        if found.epoch != epoch or found.replica_id != replica_id:
            return _session_error(ctx, ErrorCode.invalid_fetch_session_epoch)
        session = found
        session.next_epoch()
    named: list[SessionKey] = []
    epochs = [getattr(p, "current_leader_epoch", -1) for t in request.topics
              for p in t.partitions]
    for (key, index, (partition, error, offset, max_bytes)), p_epoch in zip(
            _wanted(ctx, request), epochs, strict=True):
        session.update((key, index), partition, error, offset, max_bytes, p_epoch)
        named.append((key, index))
    for t in getattr(request, "forgotten_topics_data", ()) or ():
        key = getattr(t, "topic_id", None) or t.topic
        for index in t.partitions:
            session.forget((key, index))
    max_bytes = request.max_bytes
    reads: dict[SessionKey, PartitionRead] = {}
    # what waited since the last answer first: named partitions (just appended to by
    # the follower) would otherwise take the whole response budget every time
    total = replicas.read_session(session, _order(session, named), max_bytes, reads)
    max_wait_ms = to_ms(request.max_wait)
    has_error = any(r.error is not None for r in reads.values())
    if full or total >= request.min_bytes or max_wait_ms <= 0 or has_error or session.dirty:
        ctx.metrics.on_fetch(total)
        return _session_response(ctx, session, reads)

    async def wait_then_read() -> Any:
        waiter = session.waiter = DelayedFetch(request.min_bytes, total, replica=True)
        try:
            await waiter.wait(max_wait_ms / 1000)
        finally:
            if session.waiter is waiter:
                session.waiter = None
        more = replicas.read_session(session, _order(session, named), max_bytes, reads)
        ctx.metrics.on_fetch(total + more)
        return _session_response(ctx, session, reads)

    return wait_then_read()


def handle(ctx: RequestContext, request: Any) -> Any:
    replica_id = replica_id_of(request)
    if replica_id >= 0 and ctx.version >= 7:
        if request.session_epoch >= 0:
            answer = handle_replica_session(ctx, request, replica_id)
            if answer is not None:
                return answer
        elif request.session_id:
            ctx.replicas.fetch_sessions.close(request.session_id)
    # KIP-392: consumers that send their rack (v11+) may read from followers
    from_followers = replica_id < 0 and ctx.version >= 11
    wanted = _wanted(ctx, request, from_followers)
    replicas = ctx.replicas
    read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    max_bytes = request.max_bytes if ctx.version >= 3 else 2**31 - 1
    items = [w for _, _, w in wanted]
    rack = (getattr(request, "rack_id", "") or "") if from_followers and \
        replicas.settings.rack_aware_selector else ""
    reads, total = replicas.read(items, max_bytes, read_committed, replica_id, rack,
                                 from_followers, file_records=True)
    max_wait_ms = to_ms(request.max_wait)
    # a pointer to another replica is answered at once, as an error is (KIP-392)
    has_error = any(r.error is not None or r.preferred_read_replica >= 0 for r in reads)
    if total >= request.min_bytes or max_wait_ms <= 0 or has_error or not items:
        ctx.metrics.on_fetch(total)
        return _response(ctx, wanted, reads)

    async def wait_then_read() -> Any:
        waiter = DelayedFetch(request.min_bytes, total, read_committed, replica_id >= 0)
        waiter.watch(p for p, _, _, _ in items if p is not None)
        await waiter.wait(max_wait_ms / 1000)
        again, total_again = replicas.read(items, max_bytes, read_committed, replica_id,
                                           rack, from_followers, file_records=True)
        ctx.metrics.on_fetch(total_again)
        return _response(ctx, wanted, again)

    return wait_then_read()


HANDLER = ApiHandler(API_KEY, 4, 17, handle)
