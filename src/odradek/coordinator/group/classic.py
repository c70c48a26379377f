"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

States as Kafka names them: Empty → PreparingRebalance → CompletingRebalance → Stable,
and Dead once removed. The broker relays the members' protocols (Range, RoundRobin,
Sticky, CooperativeSticky — all client-side) and the leader's assignment; it decides
only who is in the group and when a generation is complete.

A join completes as soon as every known member has rejoined, or when the rebalance
timeout ends — never later. A new group waits `group.initial.rebalance.delay.ms` for
more members first, extended by each newcomer up to the rebalance timeout (Kafka's
InitialDelayedJoin), so the first assignment arrives at that delay, not a session
timeout.

Static members (`group.instance.id`) that come back under a new member id take their
old place: in a Stable group with the same protocol, with no rebalance at all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from odradek.coordinator.group.classic_member import (
    JoinResult,
    Member,
    State,
    SyncResult,
    new_member_id,
    resolve,
)
from odradek.coordinator.group.model import Group, Runtime, Timer, TopicPartition, now_ms
from odradek.protocol.errors import ErrorCode
from odradek.protocol.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    decode_consumer_assignment,
    decode_consumer_subscription,
    encode_group_metadata_value,
    encode_key,
)

__all__ = ["ClassicGroup", "JoinResult", "Member", "State", "SyncResult"]

log = logging.getLogger(__name__)


class ClassicGroup(Group):
    kind = "classic"

    def __init__(self, group_id: str, partition: int, runtime: Runtime) -> None:
        super().__init__(group_id, partition)
        self.runtime = runtime
        self.state = State.EMPTY
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static: dict[str, str] = {}  # group.instance.id → member id
        self.pending: dict[str, Timer] = {}  # member ids handed out by MEMBER_ID_REQUIRED
        self._join_timer = Timer()
        self._sync_timer = Timer()
        self._initial_delay = False
        self._new_member_added = False
        self.on_empty: Callable[[ClassicGroup], None] | None = None

    # ---- views ------------------------------------------------------------------

    @property
    def state_name(self) -> str:
        return self.state.value

    def is_empty(self) -> bool:
        return not self.members

    def _loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None if self.members else set()
        topics: set[str] = set()
        for m in self.members.values():
            decoded = decode_consumer_subscription(m.metadata(self.protocol_name))
            if decoded is None:
                return None
            topics.update(decoded)
        return topics

    def owned_partitions(self, member_id: str) -> set[TopicPartition] | None:
        """The partitions a member was assigned in this Stable generation, when known."""
        member = self.members.get(member_id)
        if member is None or self.state != State.STABLE or self.protocol_type != "consumer":
            return None
        decoded = decode_consumer_assignment(member.assignment)
        if decoded is None:
            return None
        return {(t, p) for t, parts in decoded.items() for p in parts}

    def _candidate_protocols(self, extra: Sequence[tuple[str, bytes]] | None = None,
                             without: str | None = None) -> set[str] | None:
        sets = [{n for n, _ in m.protocols} for m in self.members.values()
                if m.member_id != without]
        if extra is not None:
            sets.append({n for n, _ in extra})
        if not sets:
            return None
        return set.intersection(*sets)

    def supports(self, protocol_type: str, protocols: Sequence[tuple[str, bytes]],
                 member_id: str | None = None) -> bool:
        if not protocol_type or not protocols:
            return False
        others = [m for m in self.members.values() if m.member_id != member_id]
        if not others:
            return True
        if protocol_type != self.protocol_type:
            return False
        candidates = self._candidate_protocols(protocols, without=member_id)
        return bool(candidates)

    def select_protocol(self) -> str:
        candidates = self._candidate_protocols() or set()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(n for n, _ in m.protocols if n in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        first = next(iter(self.members.values()))
        order = [n for n, _ in first.protocols if n in votes]
        return max(order, key=lambda n: (votes[n], -order.index(n)))

    def _current_result(self, member: Member, skip_assignment: bool = False) -> JoinResult:
        is_leader = member.member_id == self.leader_id
        members = [(m.member_id, m.instance_id, m.metadata(self.protocol_name))
                   for m in self.members.values()] if is_leader else []
        return JoinResult(ErrorCode.none, member.member_id, self.generation, self.protocol_type,
                          self.protocol_name, self.leader_id or "", members, skip_assignment)

    # ---- join -------------------------------------------------------------------

    def join(self, member_id: str, instance_id: str | None, client_id: str, client_host: str,
             session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
             protocols: list[tuple[str, bytes]], require_known_member_id: bool
             ) -> JoinResult | asyncio.Future[JoinResult]:
        if self.state == State.DEAD:
            return JoinResult(ErrorCode.coordinator_not_available, member_id)
        if not self.supports(protocol_type, protocols, member_id or None):
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
        args = (client_id, client_host, session_timeout_ms, rebalance_timeout_ms, protocol_type,
                protocols)
        if not member_id:
            if instance_id is not None and instance_id in self.static:
                return self._replace_static(instance_id, *args)
            if len(self.members) + len(self.pending) >= self.runtime.config.max_size:
                return JoinResult(ErrorCode.group_max_size_reached, member_id)
            new_id = new_member_id(instance_id or client_id)
            if instance_id is None and require_known_member_id:
                self._add_pending(new_id, session_timeout_ms)
                return JoinResult(ErrorCode.member_id_required, new_id)
            return self._add_member(new_id, instance_id, *args)
        if member_id in self.pending:
            self.pending.pop(member_id).cancel()
            return self._add_member(member_id, instance_id, *args)
        if instance_id is not None and self.static.get(instance_id, member_id) != member_id:
            return JoinResult(ErrorCode.fenced_instance_id, member_id)
        member = self.members.get(member_id)
        if member is None:
            return JoinResult(ErrorCode.unknown_member_id, member_id)
        if self.state == State.COMPLETING_REBALANCE and member.protocols == protocols:
            # the member lost our response: the same answer again
            return self._current_result(member)
        if (self.state == State.STABLE and member.member_id != self.leader_id
                and member.protocols == protocols):
            return self._current_result(member)
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.protocols = protocols
        return self._await_join(member, f"member {member_id} rejoined")

    def _add_pending(self, member_id: str, session_timeout_ms: int) -> None:
        timer = Timer()
        self.pending[member_id] = timer

        def expire() -> None:
            if self.pending.pop(member_id, None) is not None:
                self._maybe_complete_join()

        timer.set(self.runtime, session_timeout_ms, expire)

    def _add_member(self, member_id: str, instance_id: str | None, client_id: str,
                    client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
                    protocol_type: str, protocols: list[tuple[str, bytes]]
                    ) -> asyncio.Future[JoinResult]:
        if not self.members:
            self.protocol_type = protocol_type
        member = Member(member_id, instance_id, client_id, client_host, session_timeout_ms,
                        rebalance_timeout_ms, protocols)
        self.members[member_id] = member
        if instance_id is not None:
            self.static[instance_id] = member_id
        if self.leader_id is None:
            self.leader_id = member_id
        if self.state == State.PREPARING_REBALANCE and self._initial_delay:
            self._new_member_added = True
        return self._await_join(member, f"member {member_id} joined")

    def _await_join(self, member: Member, reason: str) -> asyncio.Future[JoinResult]:
        resolve(member.join_waiter, JoinResult(ErrorCode.rebalance_in_progress,
                                                member.member_id))
        waiter: asyncio.Future[JoinResult] = self._loop().create_future()
        member.join_waiter = waiter
        if self.state in (State.EMPTY, State.STABLE, State.COMPLETING_REBALANCE):
            self._prepare_rebalance(reason)
        self._maybe_complete_join()
        return waiter

    def _replace_static(self, instance_id: str, client_id: str, client_host: str,
                        session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                        protocols: list[tuple[str, bytes]]
                        ) -> JoinResult | asyncio.Future[JoinResult]:
        old_id = self.static[instance_id]
        old = self.members[old_id]
        new_id = new_member_id(instance_id)
        fenced = JoinResult(ErrorCode.fenced_instance_id, old_id)
        resolve(old.join_waiter, fenced)
        resolve(old.sync_waiter, SyncResult(ErrorCode.fenced_instance_id))
        old.heartbeat.cancel()
        member = Member(new_id, instance_id, client_id, client_host, session_timeout_ms,
                        rebalance_timeout_ms, protocols, assignment=old.assignment)
        # keep the member's place in the join order (the leader stays first)
        self.members = {(new_id if k == old_id else k): (member if k == old_id else v)
                        for k, v in self.members.items()}
        self.static[instance_id] = new_id
        was_leader = self.leader_id == old_id
        if was_leader:
            self.leader_id = new_id
        log.info("static member %s of group %s rejoined as %s", instance_id, self.group_id,
                 new_id)
        if self.state == State.STABLE and self.select_protocol() == self.protocol_name:
            old_protocols = old.protocols
            waiter: asyncio.Future[JoinResult] = self._loop().create_future()

            async def persist() -> None:
                try:
                    await self.store()
                except Exception as e:  # the log refused: undo, as Kafka does
                    code = getattr(e, "code", ErrorCode.unknown_server_error)
                    if self.members.get(new_id) is member:
                        old.protocols = old_protocols
                        self.members = {(old_id if k == new_id else k):
                                        (old if k == new_id else v)
                                        for k, v in self.members.items()}
                        self.static[instance_id] = old_id
                        if was_leader:
                            self.leader_id = old_id
                    resolve(waiter, JoinResult(code, ""))
                    return
                self._schedule_expiry(member)
                resolve(waiter, self._current_result(member, skip_assignment=was_leader))

            self.runtime.spawn(persist())
            return waiter
        return self._await_join(member, f"static member {instance_id} rejoined")

    # ---- rebalance --------------------------------------------------------------

    def _prepare_rebalance(self, reason: str) -> None:
        if self.state == State.COMPLETING_REBALANCE:
            for m in self.members.values():
                resolve(m.sync_waiter, SyncResult(ErrorCode.rebalance_in_progress))
                m.sync_waiter = None
        self._sync_timer.cancel()
        rebalance_ms = self.rebalance_timeout_ms
        if self.state == State.EMPTY:
            delay = self.runtime.config.initial_rebalance_delay_ms
            self._initial_delay = True
            self._new_member_added = False
            remaining = max(rebalance_ms - delay, 0)
            self._join_timer.set(self.runtime, min(delay, rebalance_ms) if rebalance_ms else delay,
                                 lambda: self._on_initial_delay(delay, remaining))
        else:
            self._join_timer.set(self.runtime, rebalance_ms, self._complete_join)
        log.info("preparing to rebalance group %s in state %s with old generation %d: %s",
                 self.group_id, self.state.value, self.generation, reason)
        self.state = State.PREPARING_REBALANCE

    def _on_initial_delay(self, delay: int, remaining: int) -> None:
        if self._new_member_added and remaining > 0:
            self._new_member_added = False
            step = min(delay, remaining)
            left = max(remaining - step, 0)
            self._join_timer.set(self.runtime, step, lambda: self._on_initial_delay(delay, left))
            return
        self._initial_delay = False
        self._complete_join()

    def _all_joined(self) -> bool:
        return not self.pending and all(
            m.join_waiter is not None and not m.join_waiter.done() for m in self.members.values())

    def _maybe_complete_join(self) -> None:
        if (self.state == State.PREPARING_REBALANCE and not self._initial_delay
                and self._all_joined()):
            self._complete_join()

    def _complete_join(self) -> None:
        if self.state != State.PREPARING_REBALANCE:
            return
        self._join_timer.cancel()
        self._initial_delay = False
        for m in list(self.members.values()):
            if m.join_waiter is None or m.join_waiter.done():
                log.info("removing member %s of group %s: it did not rejoin in time",
                         m.member_id, self.group_id)
                self._remove(m)
        if self.leader_id not in self.members and self.members:
            self.leader_id = next(iter(self.members))
        self.generation += 1
        self.current_state_timestamp = now_ms()
        if not self.members:
            self.protocol_name = None
            self.leader_id = None
            self.state = State.EMPTY
            log.info("group %s with generation %d is now empty", self.group_id, self.generation)
            self.runtime.spawn(self.store_quietly())
            if self.on_empty is not None:
                self.on_empty(self)
            return
        self.protocol_name = self.select_protocol()
        self.state = State.COMPLETING_REBALANCE
        log.info("group %s: generation %d (%s) with %d members", self.group_id, self.generation,
                 self.protocol_name, len(self.members))
        for m in self.members.values():
            waiter, m.join_waiter = m.join_waiter, None
            m.synced = False
            resolve(waiter, self._current_result(m))
            self._schedule_expiry(m)
        generation = self.generation
        self._sync_timer.set(self.runtime, self.rebalance_timeout_ms,
                             lambda: self._on_sync_timeout(generation))

    def _on_sync_timeout(self, generation: int) -> None:
        if self.state != State.COMPLETING_REBALANCE or self.generation != generation:
            return
        for m in list(self.members.values()):
            if not m.synced:
                log.info("removing member %s of group %s: no SyncGroup in time", m.member_id,
                         self.group_id)
                self._remove(m)
        self._prepare_rebalance("members did not sync in time")
        self._maybe_complete_join()

    # ---- sync -------------------------------------------------------------------

    def _check_member(self, member_id: str, instance_id: str | None) -> Member | ErrorCode:
        if self.state == State.DEAD:
            return ErrorCode.coordinator_not_available
        if instance_id is not None and self.static.get(instance_id, member_id) != member_id:
            return ErrorCode.fenced_instance_id
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        return member

    def sync(self, member_id: str, instance_id: str | None, generation: int,
             protocol_type: str | None, protocol_name: str | None,
             assignments: dict[str, bytes]) -> SyncResult | asyncio.Future[SyncResult]:
        member = self._check_member(member_id, instance_id)
        if isinstance(member, ErrorCode):
            return SyncResult(member)
        if generation != self.generation:
            return SyncResult(ErrorCode.illegal_generation)
        if (protocol_type is not None and protocol_type != self.protocol_type) or (
                protocol_name is not None and protocol_name != self.protocol_name):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        if self.state == State.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.rebalance_in_progress)
        if self.state == State.STABLE:
            self._schedule_expiry(member)
            return SyncResult(ErrorCode.none, self.protocol_type, self.protocol_name,
                              member.assignment)
        if self.state != State.COMPLETING_REBALANCE:
            return SyncResult(ErrorCode.unknown_member_id)
        waiter: asyncio.Future[SyncResult] = self._loop().create_future()
        resolve(member.sync_waiter, SyncResult(ErrorCode.rebalance_in_progress))
        member.sync_waiter = waiter
        member.synced = True
        self._schedule_expiry(member)
        if member_id == self.leader_id:
            self.runtime.spawn(self._apply_assignment(generation, dict(assignments)))
        return waiter

    async def _apply_assignment(self, generation: int, assignments: dict[str, bytes]) -> None:
        try:
            await self.store(assignments)
            error = ErrorCode.none
        except Exception as e:
            error = getattr(e, "code", ErrorCode.unknown_server_error)
        if self.state != State.COMPLETING_REBALANCE or self.generation != generation:
            return  # a newer rebalance began while we wrote; its members were told
        if error != ErrorCode.none:
            for m in self.members.values():
                resolve(m.sync_waiter, SyncResult(error))
                m.sync_waiter = None
            self._prepare_rebalance(f"storing the assignment failed: {error.name}")
            return
        for m in self.members.values():
            m.assignment = assignments.get(m.member_id, b"")
            resolve(m.sync_waiter, SyncResult(ErrorCode.none, self.protocol_type,
                                               self.protocol_name, m.assignment))
            m.sync_waiter = None
        self._sync_timer.cancel()
        self.state = State.STABLE
        self.current_state_timestamp = now_ms()
        log.info("group %s is stable at generation %d", self.group_id, self.generation)

    # ---- heartbeat, leave, expiry -----------------------------------------------

    def heartbeat(self, member_id: str, instance_id: str | None, generation: int) -> ErrorCode:
        member = self._check_member(member_id, instance_id)
        if isinstance(member, ErrorCode):
            return member
        if self.state == State.PREPARING_REBALANCE:
            self._schedule_expiry(member)
            return ErrorCode.rebalance_in_progress
        if self.state == State.EMPTY:
            return ErrorCode.unknown_member_id
        if generation != self.generation:
            return ErrorCode.illegal_generation
        self._schedule_expiry(member)
        return ErrorCode.none

    def touch(self, member_id: str) -> None:
        """A commit from a member counts as a heartbeat."""
        member = self.members.get(member_id)
        if member is not None:
            self._schedule_expiry(member)

    def leave(self, member_id: str, instance_id: str | None) -> ErrorCode:
        if self.state == State.DEAD:
            return ErrorCode.coordinator_not_available
        if not member_id and instance_id is not None:
            member_id = self.static.get(instance_id, "")
            if not member_id:
                return ErrorCode.unknown_member_id
        if instance_id is not None and self.static.get(instance_id, member_id) != member_id:
            return ErrorCode.fenced_instance_id
        if member_id in self.pending:
            self.pending.pop(member_id).cancel()
            self._maybe_complete_join()
            return ErrorCode.none
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        self._remove_and_rebalance(member, f"member {member_id} left the group")
        return ErrorCode.none

    def _schedule_expiry(self, member: Member) -> None:
        member_id = member.member_id
        member.heartbeat.set(self.runtime, member.session_timeout_ms,
                             lambda: self._on_expire(member_id))

    def _on_expire(self, member_id: str) -> None:
        member = self.members.get(member_id)
        if member is None:
            return
        if member.awaiting():
            self._schedule_expiry(member)  # a member waiting on us is alive
            return
        log.info("member %s of group %s failed: no heartbeat within %d ms", member_id,
                 self.group_id, member.session_timeout_ms)
        self._remove_and_rebalance(member, f"member {member_id} session expired")

    def _remove(self, member: Member) -> None:
        member.heartbeat.cancel()
        self.members.pop(member.member_id, None)
        if member.instance_id is not None and self.static.get(member.instance_id) == \
                member.member_id:
            del self.static[member.instance_id]
        resolve(member.join_waiter, JoinResult(ErrorCode.unknown_member_id, member.member_id))
        resolve(member.sync_waiter, SyncResult(ErrorCode.unknown_member_id))
        if self.leader_id == member.member_id:
            self.leader_id = next(iter(self.members), None)

    def _remove_and_rebalance(self, member: Member, reason: str) -> None:
        self._remove(member)
        if self.state in (State.STABLE, State.COMPLETING_REBALANCE):
            self._prepare_rebalance(reason)
        self._maybe_complete_join()

    def hand_over(self, code: ErrorCode) -> None:
        """The group became a consumer group (migration.py): answer everyone waiting with
        `code` and stop every timer."""
        self._join_timer.cancel()
        self._sync_timer.cancel()
        for timer in self.pending.values():
            timer.cancel()
        self.pending.clear()
        for m in self.members.values():
            m.heartbeat.cancel()
            resolve(m.join_waiter, JoinResult(code, m.member_id))
            resolve(m.sync_waiter, SyncResult(code))
        self.state = State.DEAD

    def rebalance(self, reason: str) -> None:
        """Start a rebalance (after a downgrade: the members rejoin as a classic group)."""
        if self.state in (State.STABLE, State.COMPLETING_REBALANCE):
            self._prepare_rebalance(reason)

    def remove_all(self) -> None:
        """The group is deleted or its partition unloaded: answer everyone waiting."""
        self._join_timer.cancel()
        self._sync_timer.cancel()
        for timer in self.pending.values():
            timer.cancel()
        self.pending.clear()
        for m in list(self.members.values()):
            m.heartbeat.cancel()
            resolve(m.join_waiter, JoinResult(ErrorCode.not_coordinator, m.member_id))
            resolve(m.sync_waiter, SyncResult(ErrorCode.not_coordinator))
        self.state = State.DEAD

    # ---- the log ----------------------------------------------------------------

    def metadata_value(self, assignments: dict[str, bytes] | None = None) -> GroupMetadataValue:
        members = tuple(
            MemberMetadata(
                member_id=m.member_id,
                client_id=m.client_id,
                client_host=m.client_host,
                session_timeout=m.session_timeout_ms,
                rebalance_timeout=m.rebalance_timeout_ms,
                subscription=m.metadata(self.protocol_name),
                assignment=(assignments.get(m.member_id, b"") if assignments is not None
                            else m.assignment),
                group_instance_id=m.instance_id,
            )
            for m in self.members.values()
        )
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=self.current_state_timestamp,
            members=members,
        )

    def record(self, assignments: dict[str, bytes] | None = None) -> tuple[bytes, bytes]:
        return (encode_key(GroupMetadataKey(self.group_id)),
                encode_group_metadata_value(self.metadata_value(assignments)))

    async def store(self, assignments: dict[str, bytes] | None = None) -> None:
        await self.runtime.store_group(self, self.record(assignments))

    async def store_quietly(self) -> None:
        try:
            await self.store()
        except Exception:
            log.warning("could not store the metadata of group %s", self.group_id,
                        exc_info=True)

    def load(self, value: GroupMetadataValue, timestamp: int) -> None:
        """Take the state a GroupMetadata record describes (at loading time)."""
        self.generation = value.generation
        self.protocol_type = value.protocol_type or None
        self.protocol_name = value.protocol
        self.leader_id = value.leader
        self.current_state_timestamp = (value.current_state_timestamp
                                        if value.current_state_timestamp >= 0 else timestamp)
        self.members = {}
        self.static = {}
        for mm in value.members:
            member = Member(mm.member_id, mm.group_instance_id, mm.client_id, mm.client_host,
                            mm.session_timeout, mm.rebalance_timeout,
                            [(value.protocol or "", mm.subscription)], mm.assignment,
                            synced=True)
            self.members[mm.member_id] = member
            if mm.group_instance_id is not None:
                self.static[mm.group_instance_id] = mm.member_id
        self.state = State.STABLE if self.members else State.EMPTY
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members), None)

    def start_timers(self) -> None:
        """After loading: members that do not come back within their session expire."""
        for m in self.members.values():
            self._schedule_expiry(m)
