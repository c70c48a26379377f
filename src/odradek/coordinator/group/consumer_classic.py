"""Classic members served inside a consumer group (KIP-848's online migration).

A consumer group may hold members still on the classic protocol: their JoinGroup,
SyncGroup, Heartbeat and LeaveGroup act on the consumer group's model, as Kafka 4.x's
GroupMetadataManager does (classicGroup*ToConsumerGroup):
  - JoinGroup updates the member's subscription (read from its embedded
    ConsumerProtocolSubscription, with the partitions it still owns), bumps the group
    epoch when that changed, and reconciles the member toward the server assignor's
    target at once. The answer comes back without waiting for the others: generation =
    the member's epoch, no leader (so the member sends an empty SyncGroup).
  - SyncGroup hands back the member's current partitions as a ConsumerProtocolAssignment.
  - Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin: the group
    epoch moved past it, it has partitions to give up, or partitions it waited for
    were released.
A member that does not rejoin within its rebalance timeout after being told to, or
does not sync within it after joining, is fenced like a member whose session ended.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence

from odradek.coordinator.group.classic_member import JoinResult, SyncResult
from odradek.coordinator.group.consumer import (
    ClassicInfo,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    TopicsView,
    flat,
)
from odradek.coordinator.group.embedded import (
    decode_subscription,
    encode_assignment,
    to_ids,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.group_records import Malformed

log = logging.getLogger(__name__)

PROTOCOL_TYPE = "consumer"


def supports(group: ConsumerGroup, protocol_type: str, names: set[str]) -> bool:
    """ConsumerGroup.supportsClassicProtocols: the consumer protocol type, and a protocol
    every classic member already in the group supports."""
    if protocol_type != PROTOCOL_TYPE or not names:
        return False
    classic = [m.classic for m in group.members.values() if m.classic is not None]
    return any(all(any(n == name for n, _ in c.protocols) for c in classic) for name in names)


def join(group: ConsumerGroup, member_id: str, instance_id: str | None, client_id: str,
         client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
         protocol_type: str, protocols: list[tuple[str, bytes]],
         require_known_member_id: bool, topics: TopicsView) -> JoinResult:
    config = group.runtime.config
    unknown = not member_id
    if unknown:
        member_id = str(uuid.uuid4())
    if len(group.members) >= config.max_size and member_id not in group.members:
        return JoinResult(ErrorCode.group_max_size_reached, member_id)
    if not supports(group, protocol_type, {n for n, _ in protocols}):
        return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
    if unknown and instance_id is None and require_known_member_id:
        return JoinResult(ErrorCode.member_id_required, member_id)
    try:
        subscription = decode_subscription(protocols[0][1])
    except Malformed as e:
        log.info("member %s of group %s sent a malformed subscription: %s", member_id,
                 group.group_id, e)
        return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)

    member: ConsumerMember | None = None
    replaced_consumer = False
    if instance_id is not None and instance_id in group.static:
        old = group.members.get(group.static[instance_id])
        if old is not None and old.member_id != member_id:
            if not unknown:
                return JoinResult(ErrorCode.fenced_instance_id, member_id)
            if old.classic is not None:
                old.classic.cancel()
            replaced_consumer = old.classic is None
            member = group.replace_static(old, member_id, client_id, client_host)
    if member is None:
        member = group.members.get(member_id)
    new = member is None
    if member is None:
        member = ConsumerMember(member_id, instance_id, client_id, client_host)
        group.members[member_id] = member
        if instance_id is not None:
            group.static[instance_id] = member_id
    elif member.classic is None and not replaced_consumer:
        log.info("member %s of group %s does not use the classic protocol", member_id,
                 group.group_id)
        return JoinResult(ErrorCode.unknown_member_id, member_id)

    member.client_id, member.client_host = client_id, client_host
    if rebalance_timeout_ms > 0:
        member.rebalance_timeout_ms = rebalance_timeout_ms
    if subscription.rack_id is not None:
        member.rack_id = subscription.rack_id
    info = member.classic
    if info is None:
        info = member.classic = ClassicInfo(session_timeout_ms, list(protocols))
    info.session_timeout_ms, info.protocols = session_timeout_ms, list(protocols)
    if new:
        member.subscribed_names = list(subscription.topics)
        group.bump(f"classic member {member_id} joined")
    elif sorted(subscription.topics) != sorted(member.subscribed_names):
        member.subscribed_names = list(subscription.topics)
        group.bump(f"classic member {member_id} changed its subscription")

    group.refresh_target(topics)
    owned = to_ids(subscription.owned, topics)
    group.reconcile(member, owned)
    if member.state == MemberState.UNREVOKED_PARTITIONS and not (
            flat(owned) & flat(member.revoking)):
        # it already gave them up (an eager client revokes everything before joining)
        group.reconcile(member, owned)

    info.join_timer.cancel()
    info.join_pending = False
    group.start_session(member)
    _schedule(group, member, info, "sync", rebalance_timeout_ms)
    result = JoinResult(ErrorCode.none, member.member_id, member.epoch, PROTOCOL_TYPE,
                        info.protocol_name, "", [])
    if replaced_consumer and group.on_classic_only is not None and all(
            m.classic is not None for m in group.members.values()):
        group.on_classic_only(group)
    return result


def _schedule(group: ConsumerGroup, member: ConsumerMember, info: ClassicInfo, what: str,
              timeout_ms: int) -> None:
    member_id = member.member_id
    timer = info.sync_timer if what == "sync" else info.join_timer

    def fence() -> None:
        m = group.members.get(member_id)
        if m is not None and m.classic is info:
            log.info("fencing classic member %s of group %s: it did not %s within %d ms",
                     member_id, group.group_id, what, timeout_ms)
            group.fence(m, f"classic member {member_id} failed to {what} in time")

    timer.set(group.runtime, timeout_ms, fence)


def _member(group: ConsumerGroup, member_id: str, instance_id: str | None
            ) -> tuple[ConsumerMember, ClassicInfo] | ErrorCode:
    """validateConsumerGroupMember and throwIfMemberDoesNotUseClassicProtocol."""
    if instance_id is not None:
        static_id = group.static.get(instance_id)
        if static_id is None:
            return ErrorCode.unknown_member_id
        if static_id != member_id:
            return ErrorCode.fenced_instance_id
    member = group.members.get(member_id)
    if member is None or member.classic is None:
        return ErrorCode.unknown_member_id
    return member, member.classic


def _rebalance_needed(group: ConsumerGroup, member: ConsumerMember, info: ClassicInfo) -> None:
    if not info.join_pending:
        info.join_pending = True
        _schedule(group, member, info, "join", member.rebalance_timeout_ms)


def sync(group: ConsumerGroup, member_id: str, instance_id: str | None, generation: int,
         protocol_type: str | None, protocol_name: str | None, topics: TopicsView
         ) -> SyncResult:
    found = _member(group, member_id, instance_id)
    if isinstance(found, ErrorCode):
        return SyncResult(found)
    member, info = found
    if generation != member.epoch:
        return SyncResult(ErrorCode.illegal_generation)
    if (protocol_type is not None and protocol_type != PROTOCOL_TYPE) or (
            protocol_name is not None and protocol_name != info.protocol_name):
        return SyncResult(ErrorCode.inconsistent_group_protocol)
    if (group.group_epoch > member.epoch
            and member.state != MemberState.UNREVOKED_PARTITIONS):
        # a newer rebalance began: rejoin first (a member still revoking finishes that)
        _rebalance_needed(group, member, info)
        return SyncResult(ErrorCode.rebalance_in_progress)
    info.sync_timer.cancel()
    group.start_session(member)
    assignment = encode_assignment(member.assigned, topics, info.protocols[0][1])
    member.sent = {t: set(p) for t, p in member.assigned.items()}
    return SyncResult(ErrorCode.none, PROTOCOL_TYPE, info.protocol_name, assignment)


def heartbeat(group: ConsumerGroup, member_id: str, instance_id: str | None,
              generation: int) -> ErrorCode:
    found = _member(group, member_id, instance_id)
    if isinstance(found, ErrorCode):
        return found
    member, info = found
    if generation != member.epoch:
        return ErrorCode.illegal_generation
    group.start_session(member)
    if (member.epoch < group.group_epoch
            or member.state == MemberState.UNREVOKED_PARTITIONS
            or (member.state == MemberState.UNRELEASED_PARTITIONS
                and not group.waiting_on_unreleased(member))):
        _rebalance_needed(group, member, info)
        return ErrorCode.rebalance_in_progress
    return ErrorCode.none


def leave(group: ConsumerGroup, members: Sequence[tuple[str, str | None]]
          ) -> list[ErrorCode]:
    out = []
    for member_id, instance_id in members:
        if instance_id is not None:
            static_id = group.static.get(instance_id)
            member = group.members.get(static_id) if static_id is not None else None
            if member is None:
                out.append(ErrorCode.unknown_member_id)
                continue
            if member_id and member_id != member.member_id:
                out.append(ErrorCode.fenced_instance_id)
                continue
        else:
            member = group.members.get(member_id)
        if member is None or member.classic is None:
            out.append(ErrorCode.unknown_member_id)
            continue
        log.info("classic member %s left group %s", member.member_id, group.group_id)
        group.remove(member, f"classic member {member.member_id} left the group")
        out.append(ErrorCode.none)
    return out
