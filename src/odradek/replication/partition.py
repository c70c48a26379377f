"""One hosted replica of a partition: its log, its role, and as leader its followers.

A leader whose ISR is only itself ("solo" — every partition of a single broker) takes
the fast path: the high watermark follows the log end at each append, as before
replication existed. Otherwise the high watermark is the smallest log end offset in
the ISR (the maximal ISR while a change is in flight, as Kafka's), it advances as
followers fetch and never moves back, and each advance wakes the consumer fetches and
the acks=all produces waiting for it.

Followers are tracked as Kafka's leader tracks them: a follower is caught up when it
fetches from the leader's log end; if it fetches from where the log ended at its
previous fetch, it was caught up at that previous fetch's time. One that has not been
caught up for `replica.lag.time.max.ms` leaves the ISR; one that reaches the high
watermark (and has fetched in this leader epoch) joins it. The replica manager makes
those changes; this class only answers who is out and who may come in.
"""

from __future__ import annotations

import time
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from odradek.protocol.errors import (
    ErrorCode,
    FencedLeaderEpoch,
    KafkaError,
    NotEnoughReplicas,
    NotLeaderOrFollower,
    UnknownLeaderEpoch,
)
from odradek.replication.delayed_produce import DelayedProduce
from odradek.replication.purgatory import DelayedFetch
from odradek.replication.session_listener import SessionKey, SessionListener
from odradek.storage.producer_state import AppendOrigin

if TYPE_CHECKING:
    from odradek.cluster.metadata import PartitionInfo
    from odradek.storage.log import AppendInfo, Log


def now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower (Kafka's ReplicaState)."""

    log_end_offset: int = -1  # unknown until it fetches in this leader epoch
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0


@dataclass(eq=False)
class Partition:
    topic: str
    index: int
    topic_id: uuid.UUID
    log: Log
    leader_epoch: int = 0
    waiters: set[DelayedFetch] = field(default_factory=set)
    # Role. A Partition starts as the only replica and leader, which is what a single
    # broker's partitions stay; the replica manager applies the metadata's roles.
    node_id: int = -1
    leader: int = -1
    is_leader: bool = True
    solo: bool = True  # leader and the ISR is only this broker: the fast path
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    partition_epoch: int = 0
    pending_isr: tuple[int, ...] | None = None  # an ISR change in flight
    epoch_start_offset: int = 0  # the log end when this broker became leader
    followers: dict[int, FollowerState] = field(default_factory=dict)
    produce_waiters: deque[tuple[int, DelayedProduce]] = field(default_factory=deque)
    # (end offset, bytes) of appends above the high watermark, so that a high watermark
    # advance can tell waiting consumer fetches how many bytes became readable
    _unreplicated: deque[tuple[int, int]] = field(default_factory=deque)
    # followers' incremental fetch sessions holding this partition, with its key there
    sessions: dict[SessionListener, SessionKey] = field(default_factory=dict)

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

    # ---- leader appends -----------------------------------------------------------

    def append(self, records: bytearray | memoryview,
               origin: AppendOrigin = AppendOrigin.CLIENT) -> AppendInfo:
        if not self.is_leader:
            raise NotLeaderOrFollower(
                f"broker {self.node_id} is not the leader of {self.topic}-{self.index}")
        if not self.solo:
            return self._append_replicated(records, origin)
        lso = self.log.last_stable_offset if self.waiters else 0
        info = self.log.append_as_leader(records, self.leader_epoch, origin=origin)
        if not info.duplicate:
            # the only in-sync replica: everything appended is committed
            self.log.high_watermark = self.log.log_end_offset
            if self.sessions:  # followers out of the ISR, catching up
                for session, key in self.sessions.items():
                    session.on_data(key, len(records))
            if self.waiters:
                nbytes = len(records)
                stable = self.log.last_stable_offset > lso
                for waiter in list(self.waiters):
                    if stable or not waiter.read_committed:
                        waiter.on_append(nbytes)
        self.log.maybe_flush()
        return info

    async def append_committed(self, records: bytearray, timeout_s: float,
                               origin: AppendOrigin = AppendOrigin.CLIENT) -> AppendInfo:
        """Append and wait until every in-sync replica has it — acks=all, as Kafka's
        group and transaction coordinators write their logs; raises what a produce
        would answer (NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, …)."""
        if self.solo:
            return self.append(records, origin)
        self.check_enough_replicas()
        info = self.append(records, origin)
        waiter = DelayedProduce()
        if self.wait_for_isr(info.last_offset + 1, waiter):
            await waiter.wait(timeout_s)
            code = waiter.timed_out((self.topic, self.index))
            if code != ErrorCode.none:
                raise KafkaError(f"{self.topic}-{self.index}: the in-sync replicas did not "
                                 f"confirm the write: {code.name}", code)
        return info

    def read_to_log_end(self, offset: int, max_bytes: int) -> tuple[bytes, int]:
        """(records from `offset`, the log end): how a coordinator loads its state when
        it starts leading. Up to the log end, not the high watermark, as Kafka's loaders
        read: a new leader's watermark trails what it already has by a fetch round, and
        its log is the one the other replicas will match."""
        end = self.log.log_end_offset
        if offset >= end:
            return b"", end
        records = self.log.read(offset, max_bytes, max_offset=end).records
        assert isinstance(records, bytes)  # read as bytes: no file_records asked
        return records, end

    def _append_replicated(self, records: bytearray | memoryview,
                           origin: AppendOrigin) -> AppendInfo:
        info = self.log.append_as_leader(records, self.leader_epoch, origin=origin)
        if not info.duplicate:
            self._appended(len(records))
        self.log.maybe_flush()
        return info

    def _appended(self, nbytes: int) -> None:
        """New data above the high watermark: followers may fetch it now; consumers
        must wait until the ISR has it."""
        self._unreplicated.append((self.log.log_end_offset, nbytes))
        for session, key in self.sessions.items():
            session.on_data(key, nbytes)
        for waiter in list(self.waiters):
            if waiter.replica:
                waiter.on_append(nbytes)
        self.maybe_advance_high_watermark()

    def append_marker(self, *, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                      commit: bool) -> AppendInfo:
        """Write a transaction marker as the leader (what WriteTxnMarkers does)."""
        if not self.is_leader:
            raise NotLeaderOrFollower(
                f"broker {self.node_id} is not the leader of {self.topic}-{self.index}")
        lso = self.log.last_stable_offset
        info = self.log.append_marker(
            producer_id=producer_id, producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch, commit=commit,
            leader_epoch=self.leader_epoch)
        if not self.solo:
            self._appended(info.last_offset - info.first_offset + 1)
            self.log.maybe_flush()
            return info
        self.log.high_watermark = self.log.log_end_offset
        for session, key in self.sessions.items():
            session.on_data(key, 1)
        if self.waiters and self.log.last_stable_offset > lso:
            # what became readable is not known in bytes: let read_committed waiters
            # read again (uncommitted ones saw the data when it was appended)
            for waiter in list(self.waiters):
                if waiter.read_committed:
                    waiter.complete()
        self.log.maybe_flush()
        return info

    # ---- checks -------------------------------------------------------------------

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320: a request naming an older epoch is fenced; a newer one means this
        broker has not heard of it yet. -1 asks for no check."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpoch(
                f"epoch {current_leader_epoch} of {self.topic}-{self.index} is older than "
                f"the current {self.leader_epoch}")
        raise UnknownLeaderEpoch(
            f"epoch {current_leader_epoch} of {self.topic}-{self.index} is newer than "
            f"the current {self.leader_epoch}")

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        if not self.is_leader:
            raise NotLeaderOrFollower(
                f"broker {self.node_id} is not the leader of {self.topic}-{self.index}")
        self.check_leader_epoch(current_leader_epoch)

    def check_enough_replicas(self) -> None:
        """acks=all is refused before appending when the ISR is below min.insync.replicas."""
        min_isr = self.log.config.min_insync_replicas
        if min_isr > 1 and len(self.isr) < min_isr:
            raise NotEnoughReplicas(
                f"{self.topic}-{self.index} has {len(self.isr)} in-sync replicas "
                f"{list(self.isr)}, min.insync.replicas is {min_isr}")

    # ---- roles --------------------------------------------------------------------

    def update_state(self, info: PartitionInfo) -> None:
        """Take the ISR and version the metadata (or a won ISR change) says."""
        self.replicas = info.replicas
        self.isr = info.isr
        self.partition_epoch = info.partition_epoch
        self._update_solo()
        for r in list(self.followers):
            if r not in self.replicas:
                del self.followers[r]

    def _update_solo(self) -> None:
        self.solo = (self.is_leader and self.pending_isr is None
                     and self.isr in ((), (self.node_id,)))

    def become_leader(self, info: PartitionInfo) -> None:
        self.is_leader = True
        self.leader = self.node_id
        self.leader_epoch = info.leader_epoch
        self.pending_isr = None
        self.epoch_start_offset = self.log.log_end_offset
        if info.leader_epoch >= 0:
            self.log.leader_epochs.assign(info.leader_epoch, self.log.log_end_offset)
        now = now_ms()
        # in-sync followers get a full lag time to show up before they are dropped
        self.followers = {r: FollowerState(last_caught_up_ms=now if r in info.isr else 0)
                          for r in info.replicas if r != self.node_id}
        self._unreplicated.clear()
        self.update_state(info)
        if self.solo:
            self.log.high_watermark = self.log.log_end_offset

    def become_follower(self, info: PartitionInfo) -> None:
        self.is_leader = False
        self.solo = False
        self.leader = info.leader
        self.leader_epoch = info.leader_epoch
        self.pending_isr = None
        self.followers = {}
        self._unreplicated.clear()
        self.update_state(info)
        self.solo = False
        self.fail_waiters()

    def fail_waiters(self) -> None:
        """Leadership is gone: produces waiting for the ISR fail, fetches read again
        (and get NOT_LEADER_OR_FOLLOWER)."""
        while self.produce_waiters:
            _, waiter = self.produce_waiters.popleft()
            waiter.satisfy((self.topic, self.index), ErrorCode.not_leader_or_follower)
        for fetch in list(self.waiters):
            fetch.complete()
        for session, key in list(self.sessions.items()):
            session.on_change(key, wake=True)

    # ---- followers ----------------------------------------------------------------

    def is_assigned(self, replica_id: int) -> bool:
        """A follower may fetch only if it is one of the partition's other replicas
        (a single broker's partitions list none: any replica id then reads)."""
        return not self.replicas or (replica_id in self.replicas
                                     and replica_id != self.node_id)

    def on_follower_fetch(self, replica_id: int, fetch_offset: int, now: int) -> bool:
        """Record a follower's fetch; True when it may now join the ISR."""
        state = self.followers.get(replica_id)
        if state is None:
            if replica_id not in self.replicas or replica_id == self.node_id:
                return False
            state = self.followers[replica_id] = FollowerState()
        leo = self.log.log_end_offset
        if fetch_offset >= leo:
            state.last_caught_up_ms = now
        elif fetch_offset >= state.last_fetch_leader_leo:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.last_fetch_leader_leo = leo
        state.last_fetch_ms = now
        state.log_end_offset = fetch_offset
        self.maybe_advance_high_watermark()
        return (replica_id not in self.isr and self.pending_isr is None
                and fetch_offset >= self.log.high_watermark
                and fetch_offset >= self.epoch_start_offset)

    def out_of_sync(self, now: int, lag_ms: int,
                    session_fetch_ms: Mapping[int, int] | None = None) -> list[int]:
        """In-sync followers that have not caught up within `lag_ms`.

        `session_fetch_ms`: when each follower last fetched in an incremental session.
        Such a fetch names only partitions whose offset moved, yet it fetches every
        partition of the session again (as Kafka's leader counts it): one at our log
        end at its last report was caught up at that fetch."""
        out = []
        leo = self.log.log_end_offset
        for r in self.isr:
            if r == self.node_id:
                continue
            state = self.followers.get(r)
            if state is not None and session_fetch_ms and state.log_end_offset >= leo:
                state.last_caught_up_ms = max(state.last_caught_up_ms,
                                              session_fetch_ms.get(r, 0))
            if state is None or now - state.last_caught_up_ms > lag_ms:
                out.append(r)
        return out

    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending_isr is None:
            return self.isr
        return self.isr + tuple(r for r in self.pending_isr if r not in self.isr)

    def maybe_advance_high_watermark(self) -> bool:
        """HW = the smallest log end in the (maximal) ISR; never backwards."""
        if not self.is_leader:
            return False
        new_hw = self.log.log_end_offset
        for r in self.maximal_isr():
            if r != self.node_id:
                state = self.followers.get(r)
                new_hw = min(new_hw, state.log_end_offset if state else -1)
        old_hw = self.log.high_watermark
        if new_hw <= old_hw:
            return False
        lso = self.log.last_stable_offset
        self.log.high_watermark = new_hw
        self._high_watermark_advanced(lso)
        return True

    def _high_watermark_advanced(self, lso_before: int) -> None:
        hw = self.log.high_watermark
        nbytes = 0
        while self._unreplicated and self._unreplicated[0][0] <= hw:
            nbytes += self._unreplicated.popleft()[1]
        for session, key in self.sessions.items():
            session.on_change(key)  # the followers learn the new watermark
        if self.waiters:
            stable = self.log.last_stable_offset > lso_before
            for waiter in list(self.waiters):
                if waiter.replica:
                    continue
                if waiter.read_committed:
                    if stable:
                        waiter.on_append(max(nbytes, 1))
                else:
                    waiter.on_append(max(nbytes, 1))
        self.complete_produces()

    def complete_produces(self) -> None:
        hw = self.log.high_watermark
        if not self.produce_waiters:
            return
        min_isr = self.log.config.min_insync_replicas
        error = (ErrorCode.not_enough_replicas_after_append if len(self.isr) < min_isr
                 else ErrorCode.none)
        tp = (self.topic, self.index)
        # mostly in offset order, but an idempotent retry's duplicate waits for its
        # original's offsets, which may be below those of later requests
        waiting: deque[tuple[int, DelayedProduce]] = deque()
        for required, waiter in self.produce_waiters:
            if required <= hw:
                waiter.satisfy(tp, error)
            elif not waiter.done:
                waiting.append((required, waiter))
        self.produce_waiters = waiting

    def wait_for_isr(self, required_offset: int, waiter: DelayedProduce) -> bool:
        """Register an acks=all produce needing HW ≥ `required_offset`; False if it
        already holds (nothing to wait for)."""
        if self.log.high_watermark >= required_offset:
            return False
        waiter.expect()
        self.produce_waiters.append((required_offset, waiter))
        return True
