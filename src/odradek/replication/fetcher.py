"""Follower replication: fetcher tasks that copy leaders' logs into ours.

Partitions this broker follows are spread over `num.replica.fetchers` fetchers per
leader broker (by a hash of the partition, as Kafka spreads them). Each fetcher is one
task on the event loop with one connection to its leader, and loops:

1. Partitions that just got a new leader or epoch truncate first (KIP-101/279): ask the
   leader, with OffsetForLeaderEpoch, where our latest epoch ends in its log; cut our
   log there (or at our own end of that epoch, when the leader answers with an epoch
   we do not know, then ask again with the epoch before it).
2. Then it fetches from our log end with replica_id = our id, up to the leader's log
   end; appends the batches as they are (offsets, epochs, producer state, markers);
   sets our high watermark to min(leader's, our log end).

Errors that a metadata change will resolve (fenced or unknown epochs, not the leader)
park the partition for `replica.fetch.backoff.ms`; a broken connection backs the whole
fetcher off for as long.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages import request_class
from odradek.replication.channel import BrokerChannel, ChannelSecurity
from odradek.replication.throttle import ReplicationQuota, is_throttled
from odradek.storage.epochs import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET

if TYPE_CHECKING:
    from odradek.replication.partition import Partition
    from odradek.replication.settings import ReplicaSettings

log = logging.getLogger(__name__)

FETCH_VERSION = 11  # names topics by name, carries current_leader_epoch (KIP-320)
EPOCH_VERSION = 3  # OffsetForLeaderEpoch with replica_id
TopicPartition = tuple[str, int]
_RETRIABLE = (OSError, ConnectionError, asyncio.IncompleteReadError, TimeoutError, EOFError)


@dataclass(slots=True)
class FetchState:
    leader_epoch: int
    truncating: bool = True
    delayed_until: float = 0.0
    in_sync: bool = False  # caught up with the leader's high watermark at the last fetch


def fetcher_index(topic: str, partition: int, num_fetchers: int) -> int:
    """Stable across restarts (unlike Python's salted str hash)."""
    h = 0
    for ch in topic.encode():
        h = (31 * h + ch) & 0x7FFFFFFF
    return (31 * h + partition) % max(num_fetchers, 1)


class ReplicaFetcher:
    """One fetcher: its partitions, and the incremental session with their leader.

    Nothing here scans every partition per round: the partitions whose position may
    have moved (appended to, added, removed, delayed, truncated) are kept in
    `_changed`, and a round looks at those only, as the leader does with its session.
    """

    def __init__(self, manager: FetcherManager, source: int, index: int) -> None:
        self.manager = manager
        self.source = source
        self.index = index
        self.partitions: dict[TopicPartition, FetchState] = {}
        self._wake = asyncio.Event()
        self._channel: BrokerChannel | None = None
        self._stopped = False
        self._truncating: set[TopicPartition] = set()
        self._delayed: set[TopicPartition] = set()
        self._changed: set[TopicPartition] = set()
        # throttled partitions left out of our fetches while over the follower quota
        self._held: set[TopicPartition] = set()
        # the incremental fetch session with the leader: its id (0: none yet), the
        # epoch of our next fetch, and (offset, log start, epoch) of each partition
        # as the leader's session holds it
        self._session_id = 0
        self._session_epoch = 0
        self._session_sent: dict[TopicPartition, tuple[int, int, int]] = {}
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"replica-fetcher-{source}-{index}")

    def add(self, tp: TopicPartition, leader_epoch: int) -> None:
        self.partitions[tp] = FetchState(leader_epoch)
        self._truncating.add(tp)
        self._delayed.discard(tp)
        self._held.discard(tp)
        self._changed.add(tp)
        self._wake.set()

    def remove(self, tp: TopicPartition) -> None:
        if self.partitions.pop(tp, None) is not None:
            self._truncating.discard(tp)
            self._delayed.discard(tp)
            self._held.discard(tp)
            self._changed.add(tp)  # forgotten in the session by the next fetch

    async def stop(self) -> None:
        # the flag too: Python 3.11's wait_for may turn a cancellation into the error
        # of an inner future that failed at the same moment (the leader closed on us)
        self._stopped = True
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        if self._channel is not None:
            self._channel.close()

    # ---- the loop -----------------------------------------------------------------

    async def _run(self) -> None:
        settings = self.manager.settings
        loop = asyncio.get_running_loop()
        while not self._stopped:
            if not self.partitions and not self._session_sent:
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                channel = self._connect()
                if channel is None:
                    await asyncio.sleep(settings.fetch_backoff_ms / 1000)
                    continue
                now = loop.time()
                soonest = self._expire_delays(now)
                if self._throttle_round():
                    soonest = min(soonest or now + _THROTTLE_RECHECK_S,
                                  now + _THROTTLE_RECHECK_S)
                truncating = {tp: self.partitions[tp] for tp in self._truncating
                              if self.partitions[tp].delayed_until <= now}
                if truncating:
                    await self._truncate(channel, truncating)
                elif self._session_sent or self._changed or (
                        self._session_id == 0 and len(self._delayed) < len(self.partitions)):
                    await self._fetch(channel, now)
                else:
                    await self._sleep((soonest or now + 1) - now)
            except asyncio.CancelledError:
                raise
            except _RETRIABLE as exc:
                self._close()
                if self._stopped:  # our own stop broke the call: no backoff to sit out
                    return
                log.info("replica fetcher %d-%d: connection to broker %d failed: %s",
                         self.source, self.index, self.source, exc or type(exc).__name__)
                await asyncio.sleep(settings.fetch_backoff_ms / 1000)
            except Exception:
                self._close()
                if self._stopped:
                    return
                log.exception("replica fetcher %d-%d failed", self.source, self.index)
                await asyncio.sleep(settings.fetch_backoff_ms / 1000)

    def _expire_delays(self, now: float) -> float | None:
        """Partitions whose backoff ended go back into the session; returns when the
        next one ends."""
        soonest = None
        for tp in list(self._delayed):
            state = self.partitions.get(tp)
            if state is None:
                self._delayed.discard(tp)
            elif state.delayed_until <= now:
                self._delayed.discard(tp)
                self._changed.add(tp)
            elif soonest is None or state.delayed_until < soonest:
                soonest = state.delayed_until
        return soonest

    async def _sleep(self, seconds: float) -> None:
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), max(seconds, 0.001))

    def _connect(self) -> BrokerChannel | None:
        endpoint = self.manager.endpoint(self.source)
        if endpoint is None:
            return None
        ch = self._channel
        if ch is not None and (ch.host, ch.port) != endpoint:
            self._close()  # the leader moved to a new address (it restarted)
            ch = None
        if ch is None:
            settings = self.manager.settings
            ch = self._channel = BrokerChannel(
                endpoint[0], endpoint[1], f"replica-fetcher-{self.manager.node_id}",
                settings.socket_timeout_ms / 1000, settings.socket_receive_buffer_bytes,
                self.manager.channel_security)
        return ch

    def _close(self) -> None:
        self._reset_session()
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def _delay(self, tp: TopicPartition, state: FetchState) -> None:
        backoff = self.manager.settings.fetch_backoff_ms / 1000
        state.delayed_until = asyncio.get_running_loop().time() + backoff
        if self.partitions.get(tp) is state:
            self._delayed.add(tp)
            self._changed.add(tp)  # out of the session until the backoff ends

    def _set_truncating(self, tp: TopicPartition, state: FetchState, truncating: bool) -> None:
        state.truncating = truncating
        if self.partitions.get(tp) is state:
            if truncating:
                self._truncating.add(tp)
            else:
                self._truncating.discard(tp)
            self._changed.add(tp)

    def _current(self, tp: TopicPartition, state: FetchState) -> Partition | None:
        """The partition, if it is still ours to follow as it was when we asked."""
        if self.partitions.get(tp) is not state:
            return None
        p = self.manager.partitions.get(tp)
        if p is None or p.is_leader or p.leader_epoch != state.leader_epoch:
            return None
        return p

    # ---- truncation ---------------------------------------------------------------

    async def _truncate(self, channel: BrokerChannel, states: dict[TopicPartition, FetchState]
                        ) -> None:
        asked: dict[TopicPartition, tuple[FetchState, int]] = {}
        for tp, state in states.items():
            p = self._current(tp, state)
            if p is None:
                continue
            latest = p.log.leader_epochs.latest_epoch
            if latest is None:
                # no epochs to compare: only what the old leader had committed is safe
                self._truncate_log(p, p.log.high_watermark)
                self._set_truncating(tp, state, False)
                continue
            asked[tp] = (state, latest)
        if not asked:
            return
        module = sys.modules[request_class(23, EPOCH_VERSION).__module__]
        by_topic: dict[str, list[Any]] = {}
        for (topic, index), (state, epoch) in asked.items():
            by_topic.setdefault(topic, []).append(module.OffsetForLeaderPartition(
                partition=index, current_leader_epoch=state.leader_epoch, leader_epoch=epoch))
        body = module.OffsetForLeaderEpochRequest(
            replica_id=self.manager.node_id,
            topics=tuple(module.OffsetForLeaderTopic(topic=t, partitions=tuple(ps))
                         for t, ps in by_topic.items()))
        response = await channel.call(23, EPOCH_VERSION, body)
        for topic in response.topics:
            for r in topic.partitions:
                tp = (topic.topic, r.partition)
                if tp not in asked:
                    continue
                state, _ = asked[tp]
                p = self._current(tp, state)
                if p is None:
                    continue
                if r.error_code != ErrorCode.none:
                    log.info("OffsetForLeaderEpoch %s-%d from broker %d: %s", *tp,
                             self.source, ErrorCode(r.error_code).name)
                    self._delay(tp, state)
                    continue
                target, done = truncation_target(p, r.leader_epoch, r.end_offset)
                self._truncate_log(p, target)
                self._set_truncating(tp, state, not done)

    def _truncate_log(self, p: Partition, offset: int) -> None:
        leo = p.log.log_end_offset
        if offset < leo:
            log.info("truncating %s-%d from %d to %d (leader %d, epoch %d)", p.topic, p.index,
                     leo, offset, self.source, p.leader_epoch)
            p.log.truncate_to(offset)

    # ---- the follower quota (KIP-73) -----------------------------------------------

    def _throttled(self, tp: TopicPartition, p: Partition, state: FetchState) -> bool:
        return not state.in_sync and is_throttled(
            p.log.config.follower_replication_throttled_replicas, tp[1], self.manager.node_id)

    def _throttle_round(self) -> bool:
        """Before a fetch: over quota, throttled partitions the leader's session holds
        are to be forgotten; under it, those held back are fetched again. True while
        some are held back (to look again soon)."""
        quota = self.manager.quota
        if quota.exceeded():
            for tp in self._session_sent:
                if tp not in self._held:
                    self._changed.add(tp)  # _fetchable decides
        elif self._held:
            self._changed |= self._held
            self._held.clear()
        return bool(self._held)

    # ---- fetching -----------------------------------------------------------------

    def _fetchable(self, tp: TopicPartition, now: float) -> tuple[int, int, int] | None:
        """(offset, log start, epoch) to fetch `tp` at, or None if it is not fetched
        now (gone, truncating, backing off)."""
        state = self.partitions.get(tp)
        if state is None or state.truncating or state.delayed_until > now:
            return None
        p = self._current(tp, state)
        if p is None:
            return None
        if tp in self._held or (self._throttled(tp, p, state)
                                and self.manager.quota.exceeded()):
            self._held.add(tp)
            return None
        return p.log.log_end_offset, p.log.log_start_offset, state.leader_epoch

    async def _fetch(self, channel: BrokerChannel, now: float) -> None:
        """One fetch in the incremental session with this leader (KIP-227): the first
        names every partition, later ones only those whose offset, log start or epoch
        changed since, and forget those no longer fetched here."""
        settings = self.manager.settings
        module = sys.modules[request_class(1, FETCH_VERSION).__module__]
        full = self._session_id == 0
        names = list(self.partitions) if full else list(self._changed)
        self._changed.clear()
        positions: dict[TopicPartition, tuple[int, int, int] | None] = {
            tp: self._fetchable(tp, now) for tp in names}
        by_topic: dict[str, list[Any]] = {}
        forgotten: dict[str, list[int]] = {}
        for tp, position in positions.items():
            if position is None:
                if not full and tp in self._session_sent:
                    forgotten.setdefault(tp[0], []).append(tp[1])
            elif full or self._session_sent.get(tp) != position:
                offset, start, epoch = position
                by_topic.setdefault(tp[0], []).append(module.FetchPartition(
                    partition=tp[1], current_leader_epoch=epoch, fetch_offset=offset,
                    log_start_offset=start, partition_max_bytes=settings.fetch_max_bytes))
        if full and not by_topic:
            # nothing to fetch until the metadata moves (a new leader or epoch), or
            # until the follower quota lets throttled partitions through again
            await self._sleep(_THROTTLE_RECHECK_S if self._held
                              else settings.fetch_backoff_ms / 1000)
            return
        wait_ms = settings.fetch_wait_max_ms
        epoch = 0 if full else self._session_epoch
        body = module.FetchRequest(
            replica_id=self.manager.node_id, max_wait=_ms(wait_ms),
            min_bytes=settings.fetch_min_bytes, max_bytes=settings.fetch_response_max_bytes,
            isolation_level=0, session_id=self._session_id, session_epoch=epoch,
            topics=tuple(module.FetchTopic(topic=t, partitions=tuple(ps))
                         for t, ps in by_topic.items()),
            forgotten_topics_data=tuple(module.ForgottenTopic(topic=t, partitions=tuple(ps))
                                        for t, ps in forgotten.items()),
            rack_id="")
        try:
            response = await channel.call(1, FETCH_VERSION, body, extra_wait_s=wait_ms / 1000)
        except BaseException:
            self._reset_session()
            raise
        if response.error_code in (ErrorCode.fetch_session_id_not_found,
                                   ErrorCode.invalid_fetch_session_epoch):
            log.info("replica fetcher %d-%d: session %d with broker %d: %s; starting a new "
                     "one", self.source, self.index, self._session_id, self.source,
                     ErrorCode(response.error_code).name)
            self._reset_session()
            return
        if response.error_code != ErrorCode.none:
            self._reset_session()
            raise ConnectionError(f"fetch failed: {ErrorCode(response.error_code).name}")
        # what the leader's session holds now (also what this answer is about)
        sent = {} if full else self._session_sent
        for tp, position in positions.items():
            if position is None:
                sent.pop(tp, None)
            else:
                sent[tp] = position
        if response.session_id == 0:
            self._reset_session()  # the leader keeps no session: every fetch is full
        else:
            self._session_sent = sent
            self._session_id = response.session_id
            self._session_epoch = 1 if epoch >= 2**31 - 1 else epoch + 1
        throttled_bytes = 0
        for topic in response.responses:
            for r in topic.partitions:
                tp = (topic.topic, r.partition_index)
                position = sent.get(tp)
                state = self.partitions.get(tp)
                if position is None or state is None:
                    continue
                if state.leader_epoch != position[2] or state.truncating:
                    # the answer is about the partition as it was when the fetch left
                    # (an older leader epoch; a truncation since): not ours to apply,
                    # nor its error to back off for — a fenced epoch here only says
                    # the leader moved on as we did (Kafka's onPartitionFenced). The
                    # next fetch names it at its new position, or forgets it.
                    self._changed.add(tp)
                    continue
                p = self._current(tp, state)
                if r.records and p is not None and is_throttled(
                        p.log.config.follower_replication_throttled_replicas, tp[1],
                        self.manager.node_id):
                    throttled_bytes += len(r.records)
                if self._process(tp, state, position[0], r):
                    self._changed.add(tp)
                else:
                    # not applied: name it again next time, so that the leader
                    # reads it again even if it has nothing newer
                    self._session_sent.pop(tp, None)
                    self._changed.add(tp)
        if throttled_bytes:
            self.manager.quota.record(throttled_bytes)

    def _reset_session(self) -> None:
        self._session_id = 0
        self._session_epoch = 0
        self._session_sent = {}
        self._changed.clear()  # the next fetch is a full one

    def _process(self, tp: TopicPartition, state: FetchState, offset: int, r: Any) -> bool:
        """Apply one partition's answer; False if it was not (for the session)."""
        p = self._current(tp, state)
        if p is None or p.log.log_end_offset != offset:
            return False  # the partition moved on while the fetch was out
        code = r.error_code
        if code == ErrorCode.none:
            try:
                if r.records:
                    p.log.append_as_follower(r.records)
                lg = p.log
                if r.log_start_offset > lg.log_start_offset:
                    lg.increment_log_start_offset(min(r.log_start_offset, lg.log_end_offset))
                hw = min(r.high_watermark, lg.log_end_offset)
                state.in_sync = lg.log_end_offset >= r.high_watermark
                if hw > lg.high_watermark:
                    lg.high_watermark = hw
                    for waiter in list(p.waiters):  # consumers reading here (KIP-392)
                        waiter.complete()
                lg.maybe_flush()
            except KafkaError as exc:
                log.warning("follower append to %s-%d failed: %s", *tp, exc)
                self._delay(tp, state)
                return False
            return True
        if code == ErrorCode.offset_out_of_range:
            if r.log_start_offset > offset:
                # the leader deleted what we would fetch next: start over at its start
                log.info("%s-%d: fetch offset %d is below the leader's log start %d", *tp,
                         offset, r.log_start_offset)
                p.log.truncate_fully_and_start_at(r.log_start_offset)
            else:
                self._set_truncating(tp, state, True)  # the leader's log is shorter
        else:
            # a leader that has not applied its new partitions yet answers these until it
            # has: Kafka's fetcher logs them at debug (a creation of 9,000 partitions
            # wrote 65,000 such lines per broker at info, 40% of the busy loop's time)
            level = logging.DEBUG if code in _EXPECTED_WHILE_METADATA_MOVES else logging.INFO
            log.log(level, "fetch of %s-%d from broker %d: %s", *tp, self.source,
                    ErrorCode(code).name if code in ErrorCode._value2member_map_ else code)
            self._delay(tp, state)
        return False


def truncation_target(p: Partition, leader_epoch: int, leader_end: int) -> tuple[int, bool]:
    """Where to cut our log after the leader said `leader_epoch` ends at `leader_end`
    in its log, and whether that is final (KIP-279)."""
    lg = p.log
    leo = lg.log_end_offset
    if leader_end == UNDEFINED_EPOCH_OFFSET:
        # the leader knows no epoch as old as ours: keep what was committed
        return min(lg.high_watermark, leo), True
    if leader_epoch == UNDEFINED_EPOCH:
        return min(leader_end, leo), True
    ours_epoch, ours_end = lg.leader_epochs.end_offset_for(leader_epoch, leo)
    if ours_epoch == UNDEFINED_EPOCH:
        return min(leader_end, leo), True
    if ours_epoch != leader_epoch:
        # we never saw the leader's epoch: cut to the end of ours below it, ask again
        return min(ours_end, leo), False
    return min(leader_end, ours_end), True


_THROTTLE_RECHECK_S = 0.1  # how soon partitions held back by the quota are looked at
_EXPECTED_WHILE_METADATA_MOVES = frozenset({ErrorCode.not_leader_or_follower,
                                            ErrorCode.unknown_topic_or_partition})


def _ms(value: int) -> Any:
    import datetime

    return datetime.timedelta(milliseconds=value)


class FetcherManager:
    """The fetchers of one broker, keyed by (source broker, fetcher index)."""

    def __init__(self, node_id: int, settings: Callable[[], ReplicaSettings],
                 partitions: dict[TopicPartition, Partition],
                 endpoint: Callable[[int], tuple[str, int] | None]) -> None:
        self.node_id = node_id
        self._settings = settings
        self.partitions = partitions
        self.endpoint = endpoint
        self.channel_security = ChannelSecurity()  # the inter-broker listener's
        self.quota = ReplicationQuota()  # the follower quota (set by the replica manager)
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._assigned: dict[TopicPartition, tuple[int, int]] = {}

    @property
    def settings(self) -> ReplicaSettings:
        return self._settings()

    def add(self, tp: TopicPartition, leader: int, leader_epoch: int) -> None:
        """Follow `tp` from `leader` at `leader_epoch`, truncating first."""
        self.remove(tp)
        key = (leader, fetcher_index(tp[0], tp[1], self.settings.num_fetchers))
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            fetcher = self.fetchers[key] = ReplicaFetcher(self, *key)
        fetcher.add(tp, leader_epoch)
        self._assigned[tp] = key

    def remove(self, tp: TopicPartition) -> None:
        key = self._assigned.pop(tp, None)
        if key is not None:
            self.fetchers[key].remove(tp)

    def following(self, tp: TopicPartition) -> tuple[int, int] | None:
        """(leader, leader epoch) this broker fetches `tp` at, if it does."""
        key = self._assigned.get(tp)
        if key is None:
            return None
        state = self.fetchers[key].partitions.get(tp)
        return None if state is None else (key[0], state.leader_epoch)

    async def shutdown_idle(self) -> None:
        for key, fetcher in list(self.fetchers.items()):
            if not fetcher.partitions:
                del self.fetchers[key]
                await fetcher.stop()

    async def shutdown(self) -> None:
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        self._assigned.clear()
        for fetcher in fetchers:
            await fetcher.stop()
