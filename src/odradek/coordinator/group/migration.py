"""Online conversion between a classic group and a consumer group (KIP-848, Kafka 4.x).

Upgrade: a consumer-protocol member (ConsumerGroupHeartbeat with epoch 0) joining a
non-empty classic group turns it into a consumer group, when
`group.consumer.migration.policy` allows upgrades, the group uses the consumer
embedded protocol, and its size is within `group.max.size`. Otherwise the heartbeat
gets GROUP_ID_NOT_FOUND with Kafka's message and the group stays as it was. The
classic members keep their partitions, their generation becomes their member epoch
(and the group epoch); members waiting in JoinGroup or SyncGroup are told
REBALANCE_IN_PROGRESS and rejoin into the consumer group (consumer_classic.py).

Downgrade: when the last consumer-protocol member leaves or is fenced and classic
members remain, the group turns back into a classic group (policy permitting) whose
generation is the group epoch and whose members hold their target assignment, and a
rebalance starts so that they rejoin as a classic group.
"""

from __future__ import annotations

import logging

from odradek.coordinator.group.classic import ClassicGroup, Member, State
from odradek.coordinator.group.consumer import (
    ClassicInfo,
    ConsumerGroup,
    ConsumerMember,
    TopicsView,
)
from odradek.coordinator.group.embedded import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from odradek.coordinator.group.errors import GroupIdNotFound
from odradek.coordinator.group.model import GroupConfig, Runtime
from odradek.protocol.errors import ErrorCode
from odradek.protocol.group_records import GroupMetadataKey, Malformed, encode_key

log = logging.getLogger(__name__)


def validate_upgrade(group: ClassicGroup, config: GroupConfig) -> None:
    """Kafka's validateOnlineUpgrade (raises GroupIdNotFound with its message)."""
    gid = group.group_id
    if not config.upgrade_enabled:
        reason = "online upgrade is disabled"
    elif group.protocol_type != "consumer":
        reason = "the group does not use the consumer embedded protocol"
    elif len(group.members) > config.max_size:
        reason = "the group size exceeds the consumer group maximum size"
    else:
        return
    log.info("Cannot upgrade classic group %s to consumer group because %s.", gid, reason)
    raise GroupIdNotFound(f"Cannot upgrade classic group {gid} to consumer group because "
                          f"{reason}.")


def upgrade(group: ClassicGroup, runtime: Runtime, topics: TopicsView) -> ConsumerGroup:
    """The consumer group a classic group becomes; the caller puts it in its place."""
    consumer = ConsumerGroup(group.group_id, group.partition, runtime)
    generation = group.generation
    try:
        for m in group.members.values():
            metadata = m.metadata(group.protocol_name) if group.protocol_name else (
                m.protocols[0][1] if m.protocols else b"")
            subscription = decode_subscription(metadata)
            assigned = decode_assignment(m.assignment, topics)
            member = ConsumerMember(
                m.member_id, m.instance_id, m.client_id, m.client_host,
                rack_id=subscription.rack_id, epoch=generation, previous_epoch=generation,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                subscribed_names=list(subscription.topics),
                assigned=assigned, classic=ClassicInfo(m.session_timeout_ms, list(m.protocols)))
            consumer.members[m.member_id] = member
            if m.instance_id is not None:
                consumer.static[m.instance_id] = m.member_id
            consumer.target[m.member_id] = {t: set(p) for t, p in assigned.items()}
            for t, parts in assigned.items():
                for p in parts:
                    consumer.owners[(t, p)] = m.member_id
    except Malformed as e:
        log.warning("Cannot upgrade classic group %s to consumer group because the embedded "
                    "consumer protocol is malformed: %s.", group.group_id, e)
        raise GroupIdNotFound(f"Cannot upgrade classic group {group.group_id} to consumer "
                              "group because the embedded consumer protocol is malformed."
                              ) from None
    consumer.group_epoch = consumer.assignment_epoch = generation
    consumer.offsets = group.offsets
    consumer.pending_txn_offsets = group.pending_txn_offsets
    # members waiting in JoinGroup or SyncGroup rejoin into the consumer group
    group.hand_over(ErrorCode.rebalance_in_progress)
    for member in consumer.members.values():
        consumer.start_session(member)
    runtime.spawn(_tombstone(group, runtime))
    log.info("[GroupId %s] Converted the classic group to a consumer group.", group.group_id)
    return consumer


async def _tombstone(group: ClassicGroup, runtime: Runtime) -> None:
    # the classic metadata goes: a reload must not bring its members back
    try:
        await runtime.store_group(group, (encode_key(GroupMetadataKey(group.group_id)), None))
    except Exception:
        log.warning("could not remove the classic metadata of group %s", group.group_id,
                    exc_info=True)


def can_downgrade(group: ConsumerGroup, leaving: ConsumerMember | None,
                  config: GroupConfig) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMember, or with no member leaving (a
    classic static member replaced the last consumer-protocol one)
    validateOnlineDowngradeWithReplacedMemberId."""
    others = [m for m in group.members.values() if m is not leaving]
    if (leaving is not None and leaving.classic is not None) or not others or any(
            m.classic is None for m in others):
        return False
    if not config.downgrade_enabled:
        log.info("Cannot downgrade consumer group %s to classic group because the online "
                 "downgrade is disabled.", group.group_id)
        return False
    if len(others) > config.max_size:
        log.info("Cannot downgrade consumer group %s to classic group because its group size "
                 "is greater than classic group max size.", group.group_id)
        return False
    return True


def downgrade(group: ConsumerGroup, leaving: ConsumerMember | None, runtime: Runtime,
              topics: TopicsView) -> ClassicGroup:
    """The classic group a consumer group becomes when `leaving` goes (or when no
    consumer-protocol member is left); the caller puts it in its place."""
    classic = ClassicGroup(group.group_id, group.partition, runtime)
    classic.generation = group.group_epoch
    classic.protocol_type = "consumer"
    for m in group.members.values():
        if m is leaving or m.classic is None:
            continue
        classic.members[m.member_id] = Member(
            m.member_id, m.instance_id, m.client_id, m.client_host,
            m.classic.session_timeout_ms, m.rebalance_timeout_ms, list(m.classic.protocols),
            synced=True)
        if m.instance_id is not None:
            classic.static[m.instance_id] = m.member_id
    classic.leader_id = next(iter(classic.members))
    classic.protocol_name = classic.select_protocol()
    for member in classic.members.values():
        member.assignment = encode_assignment(group.target.get(member.member_id, {}), topics,
                                              member.metadata(classic.protocol_name))
    classic.offsets = group.offsets
    classic.pending_txn_offsets = group.pending_txn_offsets
    classic.state = State.STABLE
    group.remove_all()
    log.info("[GroupId %s] Converted the consumer group to a classic group.", group.group_id)
    return classic
