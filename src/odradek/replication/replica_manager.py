"""The replica manager: the broker's partitions, their roles, and the reads and writes.

Roles come from the metadata image (`apply_leadership`): a partition this broker leads
serves produces and fetches and tracks its followers (partition.py); one it follows
refuses them and is copied from its leader by the fetchers (fetcher.py), after cutting
any divergent tail. A leader whose ISR is only itself — every partition of a single
broker — keeps the fast path where the high watermark follows each append.

ISR changes are the leader's: it adds a follower that reached the high watermark and
drops one that has not caught up within `replica.lag.time.max.ms`, one change in
flight per partition, through `alter_isr` (a conditional write of the partition state
in ZooKeeper). Without `alter_isr` (the embedded single-broker store) no ISR changes.

read_committed fetches read up to the last stable offset and get the aborted
transactions overlapping what they read. A waiting read_committed fetch is woken when
the LSO moves — by an append outside any transaction, or by a transaction marker — not
by appends inside an open transaction, which it could not read anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from odradek.protocol.errors import KafkaError, NotLeaderOrFollower, UnknownTopicOrPartition
from odradek.replication.channel import ChannelSecurity
from odradek.replication.fetch_session import FetchSessionCache, ReplicaFetchSession, SessionKey
from odradek.replication.fetcher import FetcherManager
from odradek.replication.partition import FollowerState, Partition, now_ms
from odradek.replication.settings import ReplicaSettings
from odradek.replication.throttle import ReplicationQuota, is_throttled
from odradek.storage.file_records import FileRecords

if TYPE_CHECKING:
    from odradek.cluster.metadata import MetadataImage, PartitionInfo, TopicInfo
    from odradek.storage.manager import LogManager

__all__ = ["AlterIsr", "FollowerState", "Partition", "PartitionRead", "ReplicaManager"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PartitionRead:
    """One partition's part of a fetch."""

    partition: Partition | None
    error: KafkaError | None
    records: bytes | FileRecords = b""  # a slice of a segment file for a Fetch (zero copy)
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    # read_committed only: (producer id, first offset) of the aborted transactions the
    # records overlap; None for read_uncommitted (FetchResponse writes null then)
    aborted: list[tuple[int, int]] | None = None
    preferred_read_replica: int = -1  # KIP-392: read from this broker instead


def _unassigned(p: Partition) -> PartitionRead:
    """A fetch from a broker that is not one of the partition's replicas: no records
    and no position recorded, as Kafka's leader answers it (it reads nothing past the
    high watermark to a stranger)."""
    return PartitionRead(p, None, b"", p.high_watermark, p.last_stable_offset,
                         p.log.log_start_offset)


AlterIsr = Callable[[str, int, int, int, tuple[int, ...]], Awaitable["PartitionInfo | None"]]
"""(topic, partition, leader epoch, partition epoch, new ISR) -> the new state, or None
when the write lost to a newer one (the controller moved the partition): a leader's
conditional ISR change, as Kafka's ZooKeeper-mode leaders write the partition state."""


class ReplicaManager:
    def __init__(self, logs: LogManager, node_id: int = 0) -> None:
        self.logs = logs
        self.node_id = node_id
        self.partitions: dict[tuple[str, int], Partition] = {}
        # set by the broker when the metadata lives in ZooKeeper; a single broker with
        # the embedded store has no followers, so no ISR ever changes
        self.alter_isr: AlterIsr | None = None
        self.settings = ReplicaSettings()
        self._image: MetadataImage | None = None
        self._fetchers: FetcherManager | None = None
        self._seen: set[tuple[str, int]] = set()
        # the partitions by topic (a topic's change visits only its own), each topic's
        # entry as last applied, and the topics that got partitions since then
        self._by_topic: dict[str, dict[int, Partition]] = {}
        self._applied: dict[str, TopicInfo] = {}
        self._added: set[str] = set()
        self._offline_dirs_seen = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._isr_check: asyncio.Task[None] | None = None
        self._hw_checkpoint: asyncio.Task[None] | None = None
        self._listener: str | None = None
        # the inter-broker listener and how to connect over it (set by the broker)
        self.channel_security = ChannelSecurity()
        # followers' incremental fetch sessions (KIP-227), and when each follower last
        # fetched in one (it fetches every partition of its session each time)
        self.fetch_sessions = FetchSessionCache()
        self.session_fetch_ms: dict[int, int] = {}
        # replication quotas for reassignment (KIP-73): unlimited until configured
        self.leader_quota = ReplicationQuota()
        self.follower_quota = ReplicationQuota()

    def configure(self, get: Callable[[str], Any]) -> None:
        """Read the replica.* properties (e.g. `configure(broker.config.__getitem__)`)."""
        self.settings = ReplicaSettings.from_config(get)
        window = (self.settings.quota_window_num, float(self.settings.quota_window_size_s))
        # the rates are dynamic broker configs: read at each check
        self.leader_quota = ReplicationQuota(
            lambda: int(get("leader.replication.throttled.rate")), *window)
        self.follower_quota = ReplicationQuota(
            lambda: int(get("follower.replication.throttled.rate")), *window)
        if self._fetchers is not None:
            self._fetchers.quota = self.follower_quota

    # ---- roles ------------------------------------------------------------------

    def apply_leadership(self, image: MetadataImage, topics: Iterable[str] | None = None
                         ) -> None:
        """Follow the image's leaders, epochs and ISRs.

        The broker calls this on its event loop after every metadata change, once the
        log and the Partition of every replica it hosts exist. `topics` names what the
        change was about (a topic's event); then only those topics, and those that got
        partitions here since the last call, are visited: a change costs what it changed,
        not every partition the broker holds. Without it (a cluster-wide event) each
        topic's entry is compared with the one last applied — by identity first, as the
        embedded controller keeps unchanged topics' entries, then by value.
        """
        self._image = image
        me = image.brokers.get(self.node_id)
        if me is not None and me.listeners:
            listeners = {name for name, _, _ in me.listeners}
            wanted = self.channel_security.listener
            self._listener = wanted if wanted in listeners else me.listeners[0][0]
        offline = len(self.logs.offline_dirs)
        if offline != self._offline_dirs_seen:
            # a log dir that went offline changes what its followers may do (no fetching)
            self._offline_dirs_seen = offline
            visit = set(image.topics) | set(self._applied)
        elif topics is None:
            visit = {name for name, t in image.topics.items()
                     if (seen := self._applied.get(name)) is not t and seen != t}
            visit.update(name for name in self._applied if name not in image.topics)
        else:
            visit = set(topics)
        visit |= self._added
        self._added = set()
        for name in visit:
            topic = image.topics.get(name)
            if topic is None:
                self._applied.pop(name, None)
                self._forget_topic(name)
                continue
            self._applied[name] = topic
            hosted = self._by_topic.get(name, {})
            for info in topic.partitions:
                p = hosted.get(info.partition)
                if p is not None:
                    self._apply(p, info)
            if len(hosted) > len(topic.partitions):  # cannot shrink in Kafka; be safe
                live = {info.partition for info in topic.partitions}
                for index in hosted:
                    if index not in live:
                        self._stop_following((name, index))

    def _forget_topic(self, name: str) -> None:
        """The topic left the image: its replicas follow no one any more."""
        for index in self._by_topic.get(name, {}):
            self._stop_following((name, index))

    def _stop_following(self, key: tuple[str, int]) -> None:
        self._seen.discard(key)
        if self._fetchers is not None:
            self._fetchers.remove(key)

    def apply_one(self, image: MetadataImage, topic: str, index: int) -> None:
        """`apply_leadership` for one partition: the broker opens a big topic's
        partitions in slices of the event loop and gives each its role as it opens (a
        leader's first epoch is a file written), so the walk that follows finds nothing
        left to do."""
        p = self.partitions.get((topic, index))
        info = image.topics.get(topic)
        if p is None or info is None or index >= len(info.partitions):
            return
        self._image = image
        self._apply(p, info.partitions[index])

    def _apply(self, p: Partition, info: PartitionInfo) -> None:
        key = (p.topic, p.index)
        p.node_id = self.node_id
        replicated = len(info.replicas) > 1
        if key not in self._seen:
            self._seen.add(key)
            recovered = getattr(p.log, "recovered_high_watermark", None)
            if replicated and recovered is not None:
                # the broker opened the log as its only replica (HW = LEO); with
                # followers only what the checkpoint says was committed is
                p.log.high_watermark = min(p.log.high_watermark, recovered)
        if replicated:  # also once a reassignment gives a single replica followers
            self._start_background()
        if info.leader == self.node_id:
            if not p.is_leader or p.leader_epoch != info.leader_epoch or p.leader != p.node_id:
                if self._fetchers is not None:
                    self._fetchers.remove(key)
                was = p.leader_epoch
                p.become_leader(info)
                if replicated:
                    log.info("leading %s-%d at epoch %d (was %d), ISR %s", p.topic, p.index,
                             info.leader_epoch, was, list(info.isr))
            elif (info.partition_epoch != p.partition_epoch or info.isr != p.isr
                  or info.replicas != p.replicas):
                # a reassignment changes the replicas alone: the followers it adds
                # must be let fetch
                p.update_state(info)
            # also when the ISR just shrank to this broker alone: what the others had
            # not confirmed is committed now, and acks=all waiters get their answer
            p.maybe_advance_high_watermark()
            p.complete_produces()
            return
        # not the leader: follow whoever is
        if p.is_leader or p.leader != info.leader or p.leader_epoch != info.leader_epoch:
            had_leader = p.is_leader or p.leader >= 0
            p.become_follower(info)
            if info.leader < 0:  # nothing to fetch from until a leader is elected
                # news when a leader was lost; a new partition waiting for its first
                # state is not (9,000 created at once wrote 9,000 lines)
                log.log(logging.INFO if had_leader else logging.DEBUG,
                        "%s-%d has no leader at epoch %d: waiting for one", p.topic,
                        p.index, info.leader_epoch)
            else:
                log.info("following %s-%d from broker %d at epoch %d", p.topic, p.index,
                         info.leader, info.leader_epoch)
        else:
            p.update_state(info)
        fetchers = self._fetcher_manager()
        # a replica on a failed log dir fetches nothing (Kafka's handleLogDirFailure): its
        # fetches would put it back in the ISR it cannot keep up with
        if info.leader < 0 or self.node_id not in info.replicas or p.log.offline:
            fetchers.remove(key)
        elif fetchers.following(key) != (info.leader, info.leader_epoch):
            fetchers.add(key, info.leader, info.leader_epoch)

    def _fetcher_manager(self) -> FetcherManager:
        if self._fetchers is None:
            self._fetchers = FetcherManager(self.node_id, lambda: self.settings,
                                            self.partitions, self._endpoint)
            self._fetchers.channel_security = self.channel_security
            self._fetchers.quota = self.follower_quota
        return self._fetchers

    def _eligible_for_isr(self, broker: int) -> bool:
        """Kafka's isReplicaIsrEligible: only a registered, unfenced broker joins an ISR.
        A follower's fetch that waited in the purgatory may finish after its broker died
        and the controller took it out; adding it back would keep a dead broker in the
        ISR until replica.lag.time.max.ms."""
        if self._image is None:
            return True
        info = self._image.brokers.get(broker)
        return info is not None and not info.fenced

    def _endpoint(self, broker: int) -> tuple[str, int] | None:
        info = self._image.brokers.get(broker) if self._image is not None else None
        if info is None or info.fenced:
            return None
        return info.endpoint(self._listener or "PLAINTEXT")

    # ---- ISR changes ----------------------------------------------------------------

    def _change_isr(self, p: Partition, new_isr: tuple[int, ...]) -> None:
        if self.alter_isr is None or p.pending_isr is not None or not p.is_leader:
            return
        p.pending_isr = new_isr
        p.solo = False
        alter = self.alter_isr
        task = asyncio.get_running_loop().create_task(self._alter(alter, p, new_isr))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _alter(self, alter: AlterIsr, p: Partition, new_isr: tuple[int, ...]) -> None:
        epoch, version = p.leader_epoch, p.partition_epoch
        log.info("%s-%d: ISR %s -> %s (epoch %d, version %d)", p.topic, p.index, list(p.isr),
                 list(new_isr), epoch, version)
        info = None
        try:
            info = await alter(p.topic, p.index, epoch, version, new_isr)
        except Exception:
            log.exception("ISR change of %s-%d failed", p.topic, p.index)
        if p.pending_isr == new_isr:
            p.pending_isr = None
        if info is None:
            log.info("%s-%d: ISR change to %s lost; waiting for the new state", p.topic,
                     p.index, list(new_isr))
        elif (p.is_leader and info.leader_epoch == p.leader_epoch
              and info.partition_epoch > p.partition_epoch):
            # only if newer: the watch may already have brought a later state (the
            # controller's own ISR change) before this answer got back to the loop
            p.update_state(info)
        p._update_solo()
        if p.is_leader:
            p.maybe_advance_high_watermark()
            p.complete_produces()

    def _start_background(self) -> None:
        loop = asyncio.get_running_loop()
        if self._isr_check is None:
            self._isr_check = loop.create_task(self._check_isrs())
        if self._hw_checkpoint is None:
            self._hw_checkpoint = loop.create_task(self._checkpoint_high_watermarks())

    async def _check_isrs(self) -> None:
        """Shrink the ISR of lagging followers, checked every half lag time, as Kafka."""
        while True:
            await asyncio.sleep(self.settings.lag_time_max_ms / 2000)
            try:
                self.shrink_isrs()
            except Exception:
                log.exception("ISR check failed")

    def shrink_isrs(self, now: int | None = None) -> None:
        now = now_ms() if now is None else now
        lag = self.settings.lag_time_max_ms
        for p in list(self.partitions.values()):
            if not p.is_leader or len(p.isr) <= 1 or p.pending_isr is not None:
                continue
            out = p.out_of_sync(now, lag, self.session_fetch_ms)
            if out:
                log.info("%s-%d: followers %s have not caught up in %d ms", p.topic, p.index,
                         out, lag)
                self._change_isr(p, tuple(r for r in p.isr if r not in out))

    async def _checkpoint_high_watermarks(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.settings.hw_checkpoint_interval_ms / 1000)
            try:
                await loop.run_in_executor(None, self.logs.checkpoint_high_watermarks)
            except Exception:
                log.exception("writing replication-offset-checkpoint failed")

    async def shutdown(self) -> None:
        """Stop what runs in the background (replica fetchers) before the logs close."""
        for task in (self._isr_check, self._hw_checkpoint, *self._tasks):
            if task is not None:
                task.cancel()
        for task in (self._isr_check, self._hw_checkpoint, *list(self._tasks)):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._isr_check = self._hw_checkpoint = None
        if self._fetchers is not None:
            await self._fetchers.shutdown()
        self.fetch_sessions.close_all()
        for p in self.partitions.values():
            p.fail_waiters()

    # ---- lookups --------------------------------------------------------------------

    def get(self, topic: str, index: int) -> Partition:
        p = self.partitions.get((topic, index))
        if p is None:
            raise UnknownTopicOrPartition(
                f"This server does not host this topic-partition {topic}-{index}"
            )
        return p

    def get_leader(self, topic: str, index: int, current_leader_epoch: int = -1) -> Partition:
        """The partition, if this broker leads it at `current_leader_epoch` (-1: any)."""
        p = self.get(topic, index)
        p.check_leader(current_leader_epoch)
        return p

    def get_readable(self, topic: str, index: int, current_leader_epoch: int = -1
                     ) -> Partition:
        """The partition, if a consumer may read it here (KIP-392): this broker leads
        it, or follows a leader at `current_leader_epoch` (-1: any)."""
        p = self.get(topic, index)
        if p.is_leader:
            p.check_leader(current_leader_epoch)
        elif p.leader < 0 or self._fetchers is None or \
                self._fetchers.following((topic, index)) is None:
            raise NotLeaderOrFollower(
                f"broker {self.node_id} does not replicate {topic}-{index} now")
        else:
            p.check_leader_epoch(current_leader_epoch)
        return p

    def preferred_read_replica(self, p: Partition, client_rack: str, offset: int) -> int:
        """Kafka's RackAwareReplicaSelector: the replica in the client's rack that has
        `offset`, the leader first; -1 for the leader itself (or when none fits)."""
        image = self._image
        if not client_rack or not p.is_leader or image is None:
            return -1
        me = image.brokers.get(self.node_id)
        if me is not None and me.rack == client_rack:
            return -1
        for r in p.replicas:
            state = p.followers.get(r)
            info = image.brokers.get(r)
            if (r != self.node_id and state is not None and info is not None
                    and not info.fenced and info.rack == client_rack and r in p.isr
                    and state.log_end_offset >= offset
                    and offset >= p.log.log_start_offset):
                return r
        return -1

    def add(self, partition: Partition) -> None:
        partition.node_id = self.node_id
        self.partitions[(partition.topic, partition.index)] = partition
        self._by_topic.setdefault(partition.topic, {})[partition.index] = partition
        self._added.add(partition.topic)

    def discard(self, topic: str, index: int) -> Partition | None:
        """Stop hosting one partition (a reassignment moved it away)."""
        p = self.partitions.pop((topic, index), None)
        hosted = self._by_topic.get(topic)
        if hosted is not None:
            hosted.pop(index, None)
            if not hosted:
                del self._by_topic[topic]
        self._stop_following((topic, index))
        return p

    def remove_topic(self, topic: str) -> list[Partition]:
        """Stops hosting the topic's partitions: requests naming them fail from now on.
        The caller fails each one's waiters (`Partition.fail_waiters`, which also tells
        the fetch sessions holding it), a deleted topic's in slices of the loop."""
        gone = sorted(self._by_topic.pop(topic, {}).values(), key=lambda p: p.index)
        self._applied.pop(topic, None)
        self._added.discard(topic)
        for p in gone:
            del self.partitions[(p.topic, p.index)]
            self._stop_following((p.topic, p.index))
        return gone

    def topic_partitions(self, topic: str) -> list[Partition]:
        return sorted(self._by_topic.get(topic, {}).values(), key=lambda p: p.index)

    # ---- fetch ------------------------------------------------------------------

    def read(
        self,
        wanted: Iterable[tuple[Partition | None, KafkaError | None, int, int]],
        max_bytes: int,
        read_committed: bool,
        replica_id: int = -1,
        client_rack: str = "",
        from_followers: bool = False,
        file_records: bool = False,
    ) -> tuple[list[PartitionRead], int]:
        """Read each (partition, error, offset, partition_max_bytes) within `max_bytes` overall.

        The first partition with data returns at least one whole batch even when it is
        larger than the limits (KIP-74), so a consumer always makes progress. A
        follower (`replica_id` ≥ 0) reads up to the log end, and its fetch offset is
        its log end: recorded before reading, so the high watermark it gets back
        already counts it. With `from_followers` (a consumer's Fetch v11+) a follower
        serves consumers up to its high watermark; with `client_rack` (and the
        rack-aware selector on) the leader may point the consumer to a follower in
        its rack instead of answering (KIP-392).
        """
        results: list[PartitionRead] = []
        total = 0
        follower = replica_id >= 0
        now = now_ms() if follower else 0
        for partition, error, offset, partition_max in wanted:
            if partition is None:
                results.append(PartitionRead(None, error))
                continue
            if not partition.is_leader and (follower or not from_followers
                                            or partition.leader < 0):
                # leadership moved while the fetch waited
                results.append(PartitionRead(None, NotLeaderOrFollower(
                    f"not the leader of {partition.topic}-{partition.index}")))
                continue
            if client_rack and not follower:
                preferred = self.preferred_read_replica(partition, client_rack, offset)
                if preferred >= 0:  # no records: the client asks that replica
                    results.append(PartitionRead(
                        partition, None, b"", partition.high_watermark,
                        partition.last_stable_offset, partition.log.log_start_offset,
                        None if not read_committed else [], preferred))
                    continue
            limit: int | None
            if follower and not partition.is_assigned(replica_id):
                results.append(_unassigned(partition))
                continue
            throttled = False
            if follower:
                if (partition.on_follower_fetch(replica_id, offset, now)
                        and self._eligible_for_isr(replica_id)):
                    self._change_isr(partition, (*partition.isr, replica_id))
                limit = None
                throttled = self._leader_throttled(partition)
                if throttled and self._hold_back(partition, replica_id):
                    results.append(PartitionRead(
                        partition, None, b"", partition.high_watermark,
                        partition.last_stable_offset, partition.log.log_start_offset))
                    continue
            else:
                limit = (partition.last_stable_offset if read_committed
                         else partition.high_watermark)
            budget = min(partition_max, max(max_bytes - total, 0))
            try:
                result = partition.log.read(
                    offset, budget, max_offset=limit, min_one_batch=total == 0,
                    file_records=file_records,
                )
            except KafkaError as e:
                results.append(
                    PartitionRead(
                        partition,
                        e,
                        high_watermark=partition.high_watermark,
                        last_stable_offset=partition.last_stable_offset,
                        log_start_offset=partition.log.log_start_offset,
                    )
                )
                continue
            total += len(result.records)
            if throttled:
                self.leader_quota.record(len(result.records))
            aborted = None
            if read_committed:
                aborted = partition.log.collect_aborted_transactions(offset, result.records)
            results.append(
                PartitionRead(
                    partition,
                    None,
                    result.records,
                    partition.high_watermark,
                    partition.last_stable_offset,
                    partition.log.log_start_offset,
                    aborted,
                )
            )
        return results, total

    def read_session(self, session: ReplicaFetchSession, keys: Iterable[SessionKey],
                     max_bytes: int, out: dict[SessionKey, PartitionRead]) -> int:
        """Read the session's partitions `keys` (those the fetch named and those that
        changed since the last answer) into `out`, skipping partitions with nothing
        new for the follower; returns the bytes read."""
        replica_id = session.replica_id
        now = self.session_fetch_ms[replica_id] = now_ms()
        total = 0
        keys = list(keys)
        if session.held:  # throttled last time: looked at again
            named = set(keys)
            keys += [k for k in session.held if k not in named]
            session.held.clear()
        for key in keys:
            sp = session.partitions.get(key)
            if sp is None:
                session.dirty.pop(key, None)
                continue
            p = sp.partition
            error = sp.error
            if p is not None and error is None:
                if self.partitions.get((p.topic, p.index)) is not p:
                    error = UnknownTopicOrPartition(
                        f"This server does not host this topic-partition {p.topic}-{p.index}")
                elif not p.is_leader:
                    error = NotLeaderOrFollower(f"not the leader of {p.topic}-{p.index}")
                else:
                    try:
                        p.check_leader_epoch(sp.leader_epoch)
                    except KafkaError as e:
                        error = e
            if p is None or error is not None:
                out[key] = PartitionRead(None, error)
                session.dirty.pop(key, None)
                continue
            if not p.is_assigned(replica_id):
                out[key] = _unassigned(p)
                session.dirty.pop(key, None)
                # looked at again next time: a reassignment's new follower may fetch
                # before this leader learns it is one, and would otherwise wait forever
                session.held.add(key)
                continue
            if p.on_follower_fetch(replica_id, sp.fetch_offset, now) and self._eligible_for_isr(
                    replica_id):
                self._change_isr(p, (*p.isr, replica_id))
            lg = p.log
            throttled = self._leader_throttled(p)
            if throttled and self._hold_back(p, replica_id):
                # left out of this answer, not delayed with it (KIP-73); it does not
                # make the answer go out early either
                session.dirty.pop(key, None)
                session.held.add(key)
                continue
            budget = min(sp.max_bytes, max(max_bytes - total, 0))
            first = total == 0
            try:
                records = lg.read(sp.fetch_offset, budget, max_offset=None,
                                  min_one_batch=first, file_records=True).records
            except KafkaError as e:
                out[key] = PartitionRead(p, e, high_watermark=p.high_watermark,
                                         last_stable_offset=p.last_stable_offset,
                                         log_start_offset=lg.log_start_offset)
                session.dirty.pop(key, None)
                continue
            total += len(records)
            if throttled:
                self.leader_quota.record(len(records))
            hw, lso, start = p.high_watermark, p.last_stable_offset, lg.log_start_offset
            if records or hw != sp.sent_hw or lso != sp.sent_lso or start != sp.sent_log_start:
                out[key] = PartitionRead(p, None, records, hw, lso, start)
                sp.sent_hw, sp.sent_lso, sp.sent_log_start = hw, lso, start
            # with records the follower names it again at its new offset (and it is
            # read after those still waiting); without, while the log holds more, the
            # budget was spent before it: it waits in its place, ahead of the next
            # fetch's named partitions, and the answer goes out at once (KIP-74/227)
            if records or sp.fetch_offset >= lg.log_end_offset:
                session.dirty.pop(key, None)
            elif not first:
                session.dirty.setdefault(key, None)
        return total

    def _leader_throttled(self, p: Partition) -> bool:
        return is_throttled(p.log.config.leader_replication_throttled_replicas, p.index,
                            self.node_id)

    def _hold_back(self, p: Partition, replica_id: int) -> bool:
        """Kafka's shouldLeaderThrottle: a throttled replica out of the ISR, over quota."""
        return replica_id not in p.isr and self.leader_quota.exceeded()
