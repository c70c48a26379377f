"""Incremental fetch sessions between brokers (KIP-227), the leader's side.

A follower's first fetch (session id 0, epoch 0) names every partition it follows from
this broker; the leader answers in full and keeps a session: for each partition the
follower's fetch offset, limits and leader epoch, and what it last told the follower
(high watermark, log start, last stable offset). Each later fetch (the session's id and
next epoch) names only the partitions whose fetch offset changed (and forgets those the
follower stopped fetching), and the answer holds only partitions with something new:
records, a moved high watermark or log start, or an error. So a fetch costs what
changed, not what the session holds: with 10,000 idle partitions a round is as cheap
as with one.

The leader learns what changed without looking at every partition: each partition
tells the sessions registered with it (`Partition.sessions`) when it appends (which
also wakes the session's waiting fetch) and when its high watermark or role moves;
the session keeps those keys in `dirty` until an answer has carried them.

The response budget (`max_bytes`, and each partition's) is spent in the session's order,
as Kafka's FetchSession keeps it: `dirty` is ordered, oldest first, and a partition that
returned records leaves it (the follower names it next, after those still waiting), so
one that the budget left out keeps its place and is read first next time (KIP-74: the
first partition with data always returns a whole batch; KIP-227: a partition that
returned data moves to the end). None waits behind partitions that never run dry.

Errors as Kafka's FetchSession: an unknown session id is FETCH_SESSION_ID_NOT_FOUND,
a wrong epoch INVALID_FETCH_SESSION_EPOCH; the follower then starts a new session with
a full fetch. Sessions unused for `SESSION_IDLE_MS` are dropped when new ones come.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.replication.purgatory import DelayedFetch
from odradek.replication.session_listener import SessionKey as SessionKey

if TYPE_CHECKING:
    from odradek.protocol.errors import KafkaError
    from odradek.replication.partition import Partition

SESSION_IDLE_MS = 120_000
MAX_SESSIONS = 1000  # Kafka's max.incremental.fetch.session.cache.slots


@dataclass(slots=True)
class SessionPartition:
    partition: Partition | None
    error: KafkaError | None
    fetch_offset: int
    max_bytes: int
    leader_epoch: int
    # what the follower was last told; -2: nothing yet
    sent_hw: int = -2
    sent_lso: int = -2
    sent_log_start: int = -2


class ReplicaFetchSession:
    __slots__ = ("dirty", "epoch", "held", "id", "last_used", "partitions", "replica_id",
                 "waiter")

    def __init__(self, session_id: int, replica_id: int) -> None:
        self.id = session_id
        self.replica_id = replica_id
        self.epoch = 1  # the epoch the next incremental fetch must carry
        self.partitions: dict[SessionKey, SessionPartition] = {}
        # an ordered set: keys with something to tell the follower, oldest first
        self.dirty: dict[SessionKey, None] = {}
        # throttled partitions left out of the last answer (KIP-73), to look at again
        self.held: set[SessionKey] = set()
        self.waiter: DelayedFetch | None = None
        self.last_used = time.monotonic()

    # ---- what partitions tell us --------------------------------------------------

    def on_data(self, key: SessionKey, nbytes: int) -> None:
        self.dirty[key] = None
        if self.waiter is not None:
            self.waiter.on_append(nbytes)

    def on_change(self, key: SessionKey, wake: bool = False) -> None:
        self.dirty[key] = None
        if wake and self.waiter is not None:
            self.waiter.complete()

    # ---- what the follower tells us -----------------------------------------------

    def update(self, key: SessionKey, partition: Partition | None, error: KafkaError | None,
               fetch_offset: int, max_bytes: int, leader_epoch: int) -> None:
        old = self.partitions.get(key)
        if old is not None and old.partition is not partition and old.partition is not None:
            old.partition.sessions.pop(self, None)
        if partition is not None:
            partition.sessions[self] = key
        sp = SessionPartition(partition, error, fetch_offset, max_bytes, leader_epoch)
        if old is not None and old.partition is partition:
            sp.sent_hw, sp.sent_lso, sp.sent_log_start = (
                old.sent_hw, old.sent_lso, old.sent_log_start)
        self.partitions[key] = sp

    def forget(self, key: SessionKey) -> None:
        sp = self.partitions.pop(key, None)
        self.dirty.pop(key, None)
        if sp is not None and sp.partition is not None:
            sp.partition.sessions.pop(self, None)

    def close(self) -> None:
        for key in list(self.partitions):
            self.forget(key)
        if self.waiter is not None:
            self.waiter.complete()

    def next_epoch(self) -> None:
        self.epoch = 1 if self.epoch >= 2**31 - 1 else self.epoch + 1
        self.last_used = time.monotonic()


class FetchSessionCache:
    """The leader's sessions by id."""

    def __init__(self) -> None:
        self._sessions: dict[int, ReplicaFetchSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> ReplicaFetchSession | None:
        return self._sessions.get(session_id)

    def create(self, replica_id: int) -> ReplicaFetchSession | None:
        """A new session, or None when the cache is full of sessions in use (the fetch
        is then answered without one, as Kafka does)."""
        now = time.monotonic()
        # sessions are created rarely (a follower starts, reconnects or lost its
        # session): a good time to drop those whose follower went away
        for sid, s in list(self._sessions.items()):
            if (now - s.last_used) * 1000 > SESSION_IDLE_MS:
                self.close(sid)
        if len(self._sessions) >= MAX_SESSIONS:
            return None
        while True:
            session_id = random.randint(1, 2**31 - 1)
            if session_id not in self._sessions:
                break
        session = self._sessions[session_id] = ReplicaFetchSession(session_id, replica_id)
        return session

    def close(self, session_id: int) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            session.close()

    def close_all(self) -> None:
        for sid in list(self._sessions):
            self.close(sid)
