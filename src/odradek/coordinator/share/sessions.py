"""Share sessions (KIP-932): what a member fetches from this broker, and the epoch
that orders its requests.

A ShareFetch with epoch 0 opens a session (and replaces the member's previous one);
each later ShareFetch or ShareAcknowledge carries the session's current epoch, which
then moves on by one (wrapping to 1); -1 closes it. A request whose session is gone
gets SHARE_SESSION_NOT_FOUND, one with another epoch INVALID_SHARE_SESSION_EPOCH, as
Kafka's SharePartitionManager answers. Partitions join a session with the fetches that
name them and leave it with `forgotten_topics_data`. A session belongs to the
connection that opened it: when that connection closes, the session closes too and
what the member holds is released, as Kafka's share session cache does on a
disconnect (a worker that dies gives its records back at once, not at lock expiry).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.protocol.errors import ErrorCode, KafkaError

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1

TopicIdPartition = tuple[uuid.UUID, int]


def connection_of(listener: str, host: str, port: int) -> str:
    """A connection's name while it is open (the broker's side of a TCP connection)."""
    return f"{listener}/{host}:{port}"


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= INT32_MAX else epoch + 1


@dataclass(eq=False)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1  # the epoch the next request must carry
    partitions: list[TopicIdPartition] = field(default_factory=list)
    connection: str = ""  # the connection that opened it

    def update(self, add: Iterable[TopicIdPartition],
               forget: Iterable[TopicIdPartition]) -> None:
        gone = set(forget)
        kept = [tp for tp in self.partitions if tp not in gone]
        known = set(kept)
        for tp in add:
            if tp not in known:
                kept.append(tp)
                known.add(tp)
        self.partitions = kept


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def for_fetch(self, group_id: str, member_id: str, epoch: int,
                  add: list[TopicIdPartition], forget: list[TopicIdPartition],
                  has_acks: bool) -> ShareSession:
        """The session a ShareFetch runs in (a new one at epoch 0). At FINAL_EPOCH the
        session is returned as it was: the caller acknowledges, then closes it."""
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            if add:
                raise KafkaError("a ShareFetch closing its session cannot fetch",
                                 ErrorCode.invalid_request)
            return self._existing(key)
        if epoch == INITIAL_EPOCH:
            if has_acks:
                raise KafkaError("a ShareFetch opening a session cannot acknowledge",
                                 ErrorCode.invalid_request)
            self._sessions.pop(key, None)
            if len(self._sessions) >= self.max_sessions:
                raise KafkaError(f"{self.max_sessions} share sessions already open",
                                 ErrorCode.share_session_limit_reached)
            session = ShareSession(group_id, member_id)
            session.update(add, ())
            self._sessions[key] = session
            return session
        session = self._existing(key)
        if session.epoch != epoch:
            raise KafkaError(f"share session epoch {epoch}, expected {session.epoch}",
                             ErrorCode.invalid_share_session_epoch)
        session.update(add, forget)
        session.epoch = next_epoch(session.epoch)
        return session

    def for_acknowledge(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        if epoch == INITIAL_EPOCH:
            raise KafkaError("a ShareAcknowledge cannot open a share session",
                             ErrorCode.invalid_share_session_epoch)
        session = self._existing((group_id, member_id))
        if epoch == FINAL_EPOCH:
            return session
        if session.epoch != epoch:
            raise KafkaError(f"share session epoch {epoch}, expected {session.epoch}",
                             ErrorCode.invalid_share_session_epoch)
        session.epoch = next_epoch(session.epoch)
        return session

    def of_connection(self, connection: str) -> list[ShareSession]:
        return [s for s in self._sessions.values() if s.connection == connection]

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.pop((group_id, member_id), None)

    def _existing(self, key: tuple[str, str]) -> ShareSession:
        session = self._sessions.get(key)
        if session is None:
            raise KafkaError(f"no share session for member {key[1]} of group {key[0]}",
                             ErrorCode.share_session_not_found)
        return session
