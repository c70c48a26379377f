"""A share group's members, epochs and assignment (KIP-932's ShareGroupHeartbeat).

Share groups need no revocation: a partition may be assigned to many members at once,
since the share-partition hands each record to one of them. The assignor gives every
member every partition of the topics it subscribes to; a member's assignment changes
at once, with a new member epoch (the group epoch after the bump the change caused).
A member whose heartbeat carries another epoch is fenced (FENCED_MEMBER_EPOCH); an
unknown member with a non-zero epoch gets UNKNOWN_MEMBER_ID.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from odradek.protocol.errors import ErrorCode, KafkaError

Assignment = dict[uuid.UUID, frozenset[int]]

JOIN_EPOCH = 0
LEAVE_EPOCH = -1


@dataclass(eq=False)
class ShareMember:
    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None = None
    epoch: int = 0
    subscribed_names: list[str] = field(default_factory=list)
    assigned: Assignment = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    member_id: str
    epoch: int
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: unchanged since the last answer
    message: str | None = None


@dataclass(eq=False)
class ShareGroup:
    group_id: str
    partition: int  # of __consumer_offsets: its leader coordinates the group
    group_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    kind: str = "share"
    # every topic a member subscribed to: where the group may have state once empty
    topics_seen: set[str] = field(default_factory=set)

    @property
    def state_name(self) -> str:
        return "Stable" if self.members else "Empty"

    @property
    def assignment_epoch(self) -> int:
        return self.group_epoch

    @property
    def subscribed_names(self) -> set[str]:
        return {n for m in self.members.values() for n in m.subscribed_names}

    def member(self, member_id: str, epoch: int) -> ShareMember:
        m = self.members.get(member_id)
        if m is None:
            raise KafkaError(f"member {member_id} is not in share group {self.group_id}",
                             ErrorCode.unknown_member_id)
        if epoch != m.epoch:
            raise KafkaError(f"member {member_id} has epoch {m.epoch}, not {epoch}",
                             ErrorCode.fenced_member_epoch)
        return m

    def reconcile(self, m: ShareMember, target: Assignment) -> bool:
        """Give `m` its target assignment; True when it changed (a new epoch)."""
        if target == m.assigned and m.epoch != JOIN_EPOCH:
            return False
        self.group_epoch += 1
        m.assigned = target
        m.epoch = self.group_epoch
        return True

    def remove(self, member_id: str) -> ShareMember | None:
        m = self.members.pop(member_id, None)
        if m is not None:
            self.group_epoch += 1
        return m
