"""The consumer group protocol (KIP-848): ConsumerGroupHeartbeat with member epochs.

The broker assigns. Every change to the group (a member joins or leaves, a
subscription or a subscribed topic's partition count changes) bumps the group epoch;
the target assignment is then recomputed by the server-side assignor (`uniform` or
`range`) at that epoch. Each member moves toward its target on its own heartbeats:
  - partitions it must give up are revoked first (its epoch does not advance until it
    reports, in `topic_partitions`, that it no longer owns them);
  - a partition is handed to its new owner only once the old owner released it;
  - its epoch becomes the target epoch when it holds nothing it should not.
A member that does not revoke within its rebalance timeout is fenced; one that stops
heartbeating is removed after the session timeout. Static members (`group.instance.id`)
leaving with epoch -2 keep their assignment for the session timeout and get it back
when they rejoin, with no new group epoch.

Membership is not written to `__consumer_offsets` yet (committed offsets are): after a
coordinator restart the members rejoin and are reassigned.
"""

from __future__ import annotations

import enum
import logging
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from odradek.coordinator.group.assignors import ASSIGNORS, Assignment
from odradek.coordinator.group.model import Group, Runtime, Timer, TopicPartition
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass
class TopicsView:
    """What the coordinator knows of the topics: names ↔ ids and partition counts."""

    by_name: Callable[[str], tuple[uuid.UUID, int] | None]
    name_of: Callable[[uuid.UUID], str | None]
    all_names: Callable[[], Iterable[str]]


@dataclass(eq=False)
class ClassicInfo:
    """A member that speaks the classic protocol inside a consumer group (KIP-848's
    online migration): JoinGroup/SyncGroup/Heartbeat instead of ConsumerGroupHeartbeat."""

    session_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    join_timer: Timer = field(default_factory=Timer)  # to rejoin after REBALANCE_IN_PROGRESS
    join_pending: bool = False
    sync_timer: Timer = field(default_factory=Timer)  # to send SyncGroup after its join

    @property
    def protocol_name(self) -> str:
        return self.protocols[0][0]

    def cancel(self) -> None:
        self.join_timer.cancel()
        self.join_pending = False
        self.sync_timer.cancel()


@dataclass(eq=False)
class ConsumerMember:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rack_id: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    rebalance_timeout_ms: int = 300_000
    subscribed_names: list[str] = field(default_factory=list)
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    assigned: Assignment = field(default_factory=dict)
    revoking: Assignment = field(default_factory=dict)
    session: Timer = field(default_factory=Timer)
    revoke_timer: Timer = field(default_factory=Timer)
    left_static: bool = False
    sent: Assignment | None = None  # what the last response told the member
    classic: ClassicInfo | None = None  # set while the member uses the classic protocol


@dataclass
class HeartbeatResult:
    error: ErrorCode
    member_id: str = ""
    epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None
    message: str | None = None


def flat(a: Assignment) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, parts in a.items() for p in parts}


def _nest(tps: Iterable[tuple[uuid.UUID, int]]) -> Assignment:
    out: Assignment = {}
    for t, p in tps:
        out.setdefault(t, set()).add(p)
    return out


class ConsumerGroup(Group):
    kind = "consumer"

    def __init__(self, group_id: str, partition: int, runtime: Runtime) -> None:
        super().__init__(group_id, partition)
        self.runtime = runtime
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static: dict[str, str] = {}
        self.target: dict[str, Assignment] = {}
        self.owners: dict[tuple[uuid.UUID, int], str] = {}
        self._fingerprint: tuple[tuple[str, str, int], ...] = ()
        self.assignor_name = runtime.config.consumer_assignors[0]
        # called before a member is fenced or leaves: True when it converted the group
        # to a classic one instead (migration.py's online downgrade)
        self.on_fence: Callable[[ConsumerGroup, ConsumerMember], bool] | None = None
        # called when a classic static member took the place of the last consumer-protocol
        # member: the group may become classic at once (migration.py)
        self.on_classic_only: Callable[[ConsumerGroup], None] | None = None

    # ---- views ------------------------------------------------------------------

    @property
    def state_name(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(m.epoch != self.assignment_epoch or m.state != MemberState.STABLE
               for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def is_empty(self) -> bool:
        return not self.members

    def subscribed_topics(self) -> set[str] | None:
        topics: set[str] = set()
        for m in self.members.values():
            topics.update(m.subscribed_names)
        return topics

    def owned_partitions(self, member: ConsumerMember, topics: TopicsView
                         ) -> set[TopicPartition]:
        out: set[TopicPartition] = set()
        for t, p in flat(member.assigned) | flat(member.revoking):
            name = topics.name_of(t)
            if name is not None:
                out.add((name, p))
        return out

    # ---- heartbeat --------------------------------------------------------------

    def heartbeat(self, member_id: str, epoch: int, instance_id: str | None,
                  rack_id: str | None, rebalance_timeout_ms: int,
                  subscribed_names: list[str] | None, subscribed_regex: str | None,
                  server_assignor: str | None, owned: Assignment | None, client_id: str,
                  client_host: str, topics: TopicsView) -> HeartbeatResult:
        config = self.runtime.config
        if server_assignor is not None and server_assignor not in config.consumer_assignors:
            return HeartbeatResult(ErrorCode.unsupported_assignor, member_id, epoch,
                                   message=f"assignor {server_assignor} is not supported")
        if epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(member_id, instance_id, epoch)
        if epoch == 0:
            member_id = member_id or str(uuid.uuid4())
            joined = self._join(member_id, instance_id, client_id, client_host)
            if isinstance(joined, HeartbeatResult):
                return joined
            member = joined
        else:
            found = self.members.get(member_id)
            if found is None:
                return HeartbeatResult(ErrorCode.unknown_member_id, member_id, epoch,
                                       message=f"member {member_id} is not in the group")
            member = found
            if instance_id is not None and self.static.get(instance_id) != member_id:
                return HeartbeatResult(ErrorCode.fenced_instance_id, member_id, epoch)
            if epoch > member.epoch or (epoch < member.epoch and not (
                    epoch == member.previous_epoch
                    and (owned is None or flat(owned) <= flat(member.assigned)))):
                return HeartbeatResult(ErrorCode.fenced_member_epoch, member_id, epoch,
                                       message=f"epoch {epoch} is not {member.epoch}")
        if member.classic is not None:
            # a ConsumerGroupHeartbeat makes it a consumer-protocol member (Kafka clears
            # its classic metadata the same way)
            member.classic.cancel()
            member.classic = None
        member.rack_id = rack_id if rack_id is not None else member.rack_id
        if rebalance_timeout_ms > 0:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        if server_assignor is not None:
            member.server_assignor = server_assignor
        changed_subscription = False
        if subscribed_names is not None and sorted(subscribed_names) != sorted(
                member.subscribed_names):
            member.subscribed_names = list(subscribed_names)
            changed_subscription = True
        if subscribed_regex is not None and (subscribed_regex or None) != member.subscribed_regex:
            member.subscribed_regex = subscribed_regex or None  # "" clears the pattern
            changed_subscription = True
        if changed_subscription and epoch != 0:
            self.bump(f"member {member_id} changed its subscription")
        self.start_session(member)
        self.refresh_target(topics)
        self.reconcile(member, owned)
        full = subscribed_names is not None or owned is None
        changed = member.sent is None or flat(member.sent) != flat(member.assigned)
        if owned is not None and flat(owned) != flat(member.assigned):
            changed = True
        assignment = None
        if full or changed:
            assignment = {t: set(p) for t, p in member.assigned.items()}
            member.sent = assignment
        return HeartbeatResult(ErrorCode.none, member.member_id, member.epoch,
                               config.consumer_heartbeat_interval_ms, assignment)

    def _join(self, member_id: str, instance_id: str | None, client_id: str,
              client_host: str) -> ConsumerMember | HeartbeatResult:
        if instance_id is not None and instance_id in self.static:
            old = self.members.get(self.static[instance_id])
            if old is not None and old.member_id != member_id and not old.left_static:
                return HeartbeatResult(ErrorCode.unreleased_instance_id, member_id, 0,
                                       message=f"instance {instance_id} is in use")
            if old is not None and old.left_static:
                return self.replace_static(old, member_id, client_id, client_host)
        if len(self.members) >= self.runtime.config.max_size and member_id not in self.members:
            return HeartbeatResult(ErrorCode.group_max_size_reached, member_id, 0)
        existing = self.members.get(member_id)
        if existing is not None:
            # a fenced member rejoining: start it over
            self.remove(existing, f"member {member_id} rejoined with epoch 0")
        member = ConsumerMember(member_id, instance_id, client_id, client_host)
        self.members[member_id] = member
        if instance_id is not None:
            self.static[instance_id] = member_id
        self.bump(f"member {member_id} joined")
        return member

    def replace_static(self, old: ConsumerMember, member_id: str, client_id: str,
                        client_host: str) -> ConsumerMember:
        old.session.cancel()
        old.revoke_timer.cancel()
        del self.members[old.member_id]
        member = ConsumerMember(member_id, old.instance_id, client_id, client_host,
                                old.rack_id, old.epoch, old.previous_epoch, old.state,
                                old.rebalance_timeout_ms, list(old.subscribed_names),
                                old.subscribed_regex, old.server_assignor,
                                old.assigned, old.revoking)
        self.members[member_id] = member
        assert old.instance_id is not None
        self.static[old.instance_id] = member_id
        if old.member_id in self.target:
            self.target[member_id] = self.target.pop(old.member_id)
        for tp, owner in list(self.owners.items()):
            if owner == old.member_id:
                self.owners[tp] = member_id
        log.info("static member %s of group %s is back as %s", old.instance_id, self.group_id,
                 member_id)
        return member

    def _leave(self, member_id: str, instance_id: str | None, epoch: int) -> HeartbeatResult:
        member = self.members.get(member_id)
        if member is None and instance_id is not None:
            member = self.members.get(self.static.get(instance_id, ""))
        if member is None:
            return HeartbeatResult(ErrorCode.unknown_member_id, member_id, epoch)
        if epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            member.left_static = True
            self.start_session(member)  # its place is kept for a session timeout
            return HeartbeatResult(ErrorCode.none, member.member_id, STATIC_LEAVE_EPOCH)
        self.fence(member, f"member {member.member_id} left")
        return HeartbeatResult(ErrorCode.none, member.member_id, LEAVE_EPOCH)

    def fence(self, member: ConsumerMember, reason: str) -> None:
        """Remove a member that left or failed, unless that downgrades the group."""
        if self.on_fence is not None and self.on_fence(self, member):
            return
        self.remove(member, reason)

    def remove(self, member: ConsumerMember, reason: str) -> None:
        member.session.cancel()
        member.revoke_timer.cancel()
        if member.classic is not None:
            member.classic.cancel()
        self.members.pop(member.member_id, None)
        if member.instance_id is not None and self.static.get(member.instance_id) == \
                member.member_id:
            del self.static[member.instance_id]
        self.target.pop(member.member_id, None)
        for tp, owner in list(self.owners.items()):
            if owner == member.member_id:
                del self.owners[tp]
        self.bump(reason)

    def remove_all(self) -> None:
        for m in self.members.values():
            m.session.cancel()
            m.revoke_timer.cancel()
            if m.classic is not None:
                m.classic.cancel()
        self.members.clear()

    def bump(self, reason: str) -> None:
        self.group_epoch += 1
        log.info("group %s epoch %d: %s", self.group_id, self.group_epoch, reason)

    def start_session(self, member: ConsumerMember) -> None:
        member_id = member.member_id
        # a classic member keeps the session.timeout.ms of its JoinGroup
        timeout = (member.classic.session_timeout_ms if member.classic is not None
                   else self.runtime.config.consumer_session_timeout_ms)

        def expire() -> None:
            m = self.members.get(member_id)
            if m is not None:
                log.info("member %s of group %s failed: no heartbeat within %d ms", member_id,
                         self.group_id, timeout)
                self.fence(m, f"member {member_id} session expired")

        member.session.set(self.runtime, timeout, expire)

    # ---- assignment -------------------------------------------------------------

    def _subscribed(self, member: ConsumerMember, topics: TopicsView,
                    names: list[str]) -> set[uuid.UUID]:
        wanted = set(member.subscribed_names)
        if member.subscribed_regex:
            try:
                pattern = re.compile(member.subscribed_regex)
                wanted.update(n for n in names if pattern.fullmatch(n)
                              and not n.startswith("__"))
            except re.error:
                pass
        out = set()
        for name in wanted:
            found = topics.by_name(name)
            if found is not None:
                out.add(found[0])
        return out

    def refresh_target(self, topics: TopicsView) -> None:
        """Recompute the target assignment when the group or its topics changed."""
        names = list(topics.all_names()) if any(
            m.subscribed_regex for m in self.members.values()) else []
        subs = {m.member_id: self._subscribed(m, topics, names) for m in self.members.values()}
        counts: dict[uuid.UUID, int] = {}
        fingerprint = []
        for topic_id in sorted(set().union(*subs.values()) if subs else set(), key=str):
            name = topics.name_of(topic_id)
            found = topics.by_name(name) if name is not None else None
            if found is not None:
                counts[topic_id] = found[1]
                fingerprint.append((name or "", str(topic_id), found[1]))
        if tuple(fingerprint) != self._fingerprint:
            self._fingerprint = tuple(fingerprint)
            self.bump("subscribed topics changed")
        if self.group_epoch <= self.assignment_epoch:
            return
        preferred = next((m.server_assignor for m in self.members.values()
                          if m.server_assignor), None)
        self.assignor_name = preferred or self.runtime.config.consumer_assignors[0]
        assign = ASSIGNORS[self.assignor_name]
        self.target = assign(subs, counts, self.target)
        self.assignment_epoch = self.group_epoch

    def reconcile(self, member: ConsumerMember, owned: Assignment | None) -> None:
        target = flat(self.target.get(member.member_id, {}))
        if member.state == MemberState.UNREVOKED_PARTITIONS:
            still = flat(member.revoking)
            if owned is not None and not (flat(owned) & still):
                for tp in still:
                    if self.owners.get(tp) == member.member_id:
                        del self.owners[tp]
                member.revoking = {}
                member.revoke_timer.cancel()
                member.state = MemberState.STABLE
            else:
                # a newer target may give back what is being revoked
                combined = flat(member.assigned) | still
                member.assigned = _nest(combined & target)
                member.revoking = _nest(combined - target)
                if member.revoking:
                    return
                member.revoke_timer.cancel()
                member.state = MemberState.STABLE
        if member.epoch >= self.assignment_epoch and member.state == MemberState.STABLE:
            return
        current = flat(member.assigned)
        kept = current & target
        revoke = current - target
        if revoke:
            member.assigned = _nest(kept)
            member.revoking = _nest(revoke)
            member.state = MemberState.UNREVOKED_PARTITIONS
            member_id = member.member_id

            def fence() -> None:
                m = self.members.get(member_id)
                if m is not None and m.state == MemberState.UNREVOKED_PARTITIONS:
                    log.info("fencing member %s of group %s: it did not revoke in time",
                             member_id, self.group_id)
                    self.fence(m, f"member {member_id} did not revoke partitions")

            if member.classic is None:  # a classic member has its join and sync timers
                member.revoke_timer.set(self.runtime, member.rebalance_timeout_ms, fence)
            return
        wanted = target - kept
        free = {tp for tp in wanted if self.owners.get(tp, member.member_id) == member.member_id}
        for tp in free:
            self.owners[tp] = member.member_id
        member.assigned = _nest(kept | free)
        if member.epoch != self.assignment_epoch:
            member.previous_epoch = member.epoch
            member.epoch = self.assignment_epoch
        member.state = (MemberState.UNRELEASED_PARTITIONS if wanted - free
                        else MemberState.STABLE)

    # ---- offsets ----------------------------------------------------------------

    def validate_commit(self, member_id: str, epoch: int) -> ConsumerMember | ErrorCode | None:
        """The committing member, None for an admin commit, or the error to answer."""
        if not member_id and epoch < 0:
            return None if not self.members else ErrorCode.unknown_member_id
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if epoch != member.epoch:
            # Kafka's validateMemberEpoch: a classic member's generation is its epoch
            return (ErrorCode.illegal_generation if member.classic is not None
                    else ErrorCode.stale_member_epoch)
        return member

    def waiting_on_unreleased(self, member: ConsumerMember) -> bool:
        """Whether a partition of the member's target is still owned by another member."""
        mine = flat(member.assigned)
        return any(self.owners.get(tp, member.member_id) != member.member_id
                   for tp in flat(self.target.get(member.member_id, {})) - mine)
