"""Authorization matrix cases: what clients do (produce, fetch, offsets, metadata,
groups)."""

from __future__ import annotations

import uuid
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.security.acl import AclOperation as Op
from odradek.security.acl import ResourceType as R
from tests.security.authz import (
    AUTH_ERRORS,
    GROUP_DENIED,
    MS,
    OK,
    TOPIC_DENIED,
    TXN_DENIED,
    Matrix,
    Session,
    case,
    codes,
)

# ---- produce, fetch, offsets, metadata --------------------------------------------------


@case(0)
def _produce(m: Matrix) -> None:
    m.create_topic("m-produce")
    assert m.produce(m.alice, "m-produce") == TOPIC_DENIED
    assert m.offsets("m-produce") == 0  # nothing appended
    with m.grant((R.TOPIC, "m-produce", Op.WRITE)):
        assert m.produce(m.alice, "m-produce") == OK
    assert m.offsets("m-produce") == 1


def _fetch(session: Session, topic: str) -> Any:
    return session.req(1, 12, replica_id=-1, max_wait=10 * MS, min_bytes=1,
                       max_bytes=1 << 20, topics=(session.kind(
                           1, 12, "FetchTopic", topic=topic, partitions=(session.kind(
                               1, 12, "FetchPartition", partition=0, fetch_offset=0,
                               partition_max_bytes=1 << 20),)),)).responses[0].partitions[0]


@case(1)
def _fetch_case(m: Matrix) -> None:
    m.create_topic("m-fetch")
    assert m.produce(m.admin, "m-fetch") == OK
    denied = _fetch(m.alice, "m-fetch")
    assert denied.error_code == TOPIC_DENIED and not denied.records
    with m.grant((R.TOPIC, "m-fetch", Op.READ)):
        allowed = _fetch(m.alice, "m-fetch")
    assert allowed.error_code == OK and allowed.records


@case(2)
def _list_offsets(m: Matrix) -> None:
    m.create_topic("m-list-offsets")

    def ask() -> Any:
        return m.alice.req(2, 7, replica_id=-1, topics=(m.alice.kind(
            2, 7, "ListOffsetsTopic", name="m-list-offsets", partitions=(m.alice.kind(
                2, 7, "ListOffsetsPartition", partition_index=0, timestamp=-1),)),)
        ).topics[0].partitions[0]

    assert ask().error_code == TOPIC_DENIED
    with m.grant((R.TOPIC, "m-list-offsets", Op.DESCRIBE)):
        assert ask().error_code == OK


@case(3)
def _metadata(m: Matrix) -> None:
    m.create_topic("m-metadata")

    def ask(name: str, create: bool = False) -> Any:
        return m.alice.req(3, 12, allow_auto_topic_creation=create, topics=(
            m.alice.kind(3, 12, "MetadataRequestTopic", name=name),)).topics[0]

    assert ask("m-metadata").error_code == TOPIC_DENIED
    assert ask("m-metadata-auto", create=True).error_code == TOPIC_DENIED
    assert m.topic_partitions("m-metadata-auto") == 0  # not auto-created
    with m.grant((R.TOPIC, "m-metadata", Op.DESCRIBE)):
        topic = ask("m-metadata")
    assert topic.error_code == OK and len(topic.partitions) == 1


@case(23)
def _offset_for_leader_epoch(m: Matrix) -> None:
    m.create_topic("m-ofle")

    def ask() -> Any:
        return m.alice.req(23, 4, replica_id=-1, topics=(m.alice.kind(
            23, 4, "OffsetForLeaderTopic", topic="m-ofle", partitions=(m.alice.kind(
                23, 4, "OffsetForLeaderPartition", partition=0, current_leader_epoch=-1,
                leader_epoch=0),)),)).topics[0].partitions[0]

    assert ask().error_code == TOPIC_DENIED
    with m.grant((R.TOPIC, "m-ofle", Op.DESCRIBE)):
        assert ask().error_code == OK


@case(75)
def _describe_topic_partitions(m: Matrix) -> None:
    m.create_topic("m-dtp")

    def ask() -> Any:
        return m.alice.req(75, 0, response_partition_limit=100, topics=(
            m.alice.kind(75, 0, "TopicRequest", name="m-dtp"),)).topics[0]

    assert ask().error_code == TOPIC_DENIED
    with m.grant((R.TOPIC, "m-dtp", Op.DESCRIBE)):
        topic = ask()
    assert topic.error_code == OK and len(topic.partitions) == 1


@case(61)
def _describe_producers(m: Matrix) -> None:
    m.create_topic("m-producers")

    def ask() -> Any:
        return m.alice.req(61, 0, topics=(m.alice.kind(
            61, 0, "TopicRequest", name="m-producers", partition_indexes=(0,)),)
        ).topics[0].partitions[0]

    assert ask().error_code == TOPIC_DENIED
    with m.grant((R.TOPIC, "m-producers", Op.READ)):
        assert ask().error_code == OK


@case(21)
def _delete_records(m: Matrix) -> None:
    m.create_topic("m-delete-records")
    assert m.produce(m.admin, "m-delete-records") == OK

    def ask() -> ErrorCode:
        response = m.alice.req(21, 2, timeout=30_000 * MS, topics=(m.alice.kind(
            21, 2, "DeleteRecordsTopic", name="m-delete-records", partitions=(m.alice.kind(
                21, 2, "DeleteRecordsPartition", partition_index=0, offset=1),)),))
        return ErrorCode(response.topics[0].partitions[0].error_code)

    assert ask() == TOPIC_DENIED
    assert m.offsets("m-delete-records", -2) == 0  # nothing deleted
    with m.grant((R.TOPIC, "m-delete-records", Op.DELETE)):
        assert ask() == OK
    assert m.offsets("m-delete-records", -2) == 1


# ---- groups ------------------------------------------------------------------------------


@case(8)
def _offset_commit(m: Matrix) -> None:
    m.create_topic("m-commit")
    response = m.commit(m.alice, "m-commit-g", "m-commit", 1)
    assert codes(response) == {GROUP_DENIED}
    with m.grant((R.GROUP, "m-commit-g", Op.READ)):
        # the group alone is not enough: READ on the topic too
        assert codes(m.commit(m.alice, "m-commit-g", "m-commit", 1)) == {TOPIC_DENIED}
        assert m.committed("m-commit-g", "m-commit") == -1  # nothing committed
        with m.grant((R.TOPIC, "m-commit", Op.READ)):
            assert codes(m.commit(m.alice, "m-commit-g", "m-commit", 1)) == {OK}
    assert m.committed("m-commit-g", "m-commit") == 1


@case(9)
def _offset_fetch(m: Matrix) -> None:
    m.create_topic("m-fetch-offsets")
    assert codes(m.commit(m.admin, "m-fetch-offsets-g", "m-fetch-offsets", 3)) == {OK}

    def ask() -> Any:
        return m.alice.req(9, 8, groups=(m.alice.kind(
            9, 8, "OffsetFetchRequestGroup", group_id="m-fetch-offsets-g", topics=(
                m.alice.kind(9, 8, "OffsetFetchRequestTopics", name="m-fetch-offsets",
                             partition_indexes=(0,)),)),)).groups[0]

    assert ask().error_code == GROUP_DENIED
    with m.grant((R.GROUP, "m-fetch-offsets-g", Op.DESCRIBE),
                 (R.TOPIC, "m-fetch-offsets", Op.DESCRIBE)):
        group = ask()
    assert group.error_code == OK
    assert group.topics[0].partitions[0].committed_offset == 3


@case(10)
def _find_coordinator(m: Matrix) -> None:
    def ask(key_type: int, key: str) -> Any:
        return m.alice.req(10, 4, key_type=key_type, coordinator_keys=(key,)).coordinators[0]

    assert ask(0, "m-find-g").error_code == GROUP_DENIED
    assert ask(1, "m-find-x").error_code == TXN_DENIED
    with m.grant((R.GROUP, "m-find-g", Op.DESCRIBE),
                 (R.TRANSACTIONAL_ID, "m-find-x", Op.DESCRIBE)):
        group, txn = ask(0, "m-find-g"), ask(1, "m-find-x")
    assert group.error_code == OK and group.node_id >= 0
    assert txn.error_code == OK and txn.node_id >= 0


def _join(session: Session, group: str, member_id: str = "") -> Any:
    protocol = session.kind(11, 5, "JoinGroupRequestProtocol", name="range", metadata=b"")
    return session.req(11, 5, group_id=group, session_timeout=30_000 * MS,
                       rebalance_timeout=30_000 * MS, member_id=member_id,
                       protocol_type="consumer", protocols=(protocol,))


def _joined(session: Session, group: str) -> tuple[str, int]:
    """A member of `group` (JoinGroup twice: Kafka asks for a member id first)."""
    first = _join(session, group)
    response = _join(session, group, str(first.member_id)) \
        if first.error_code == ErrorCode.member_id_required else first
    assert response.error_code == OK, response
    return str(response.member_id), int(response.generation_id)


@case(11)
def _join_group(m: Matrix) -> None:
    assert _join(m.alice, "m-join-g").error_code == GROUP_DENIED
    assert m.group_state("m-join-g") == "Dead"  # no group made
    with m.grant((R.GROUP, "m-join-g", Op.READ)):
        member, _ = _joined(m.alice, "m-join-g")
        assert member
        assert m.group_state("m-join-g") != "Dead"
        m.alice.req(13, 4, group_id="m-join-g", members=(
            m.alice.kind(13, 4, "MemberIdentity", member_id=member),))


def _sync(session: Session, group: str, member: str, generation: int) -> Any:
    return session.req(14, 5, group_id=group, generation_id=generation, member_id=member,
                       protocol_type="consumer", protocol_name="range", assignments=(
                           session.kind(14, 5, "SyncGroupRequestAssignment", member_id=member,
                                        assignment=b"\0\1"),))


@case(12)
def _heartbeat(m: Matrix) -> None:
    with m.grant((R.GROUP, "m-heartbeat-g", Op.READ)):
        member, generation = _joined(m.alice, "m-heartbeat-g")
        assert _sync(m.alice, "m-heartbeat-g", member, generation).error_code == OK

    def ask() -> ErrorCode:
        return ErrorCode(m.alice.req(12, 4, group_id="m-heartbeat-g", generation_id=generation,
                                     member_id=member).error_code)

    assert ask() == GROUP_DENIED
    with m.grant((R.GROUP, "m-heartbeat-g", Op.READ)):
        assert ask() == OK


@case(13)
def _leave_group(m: Matrix) -> None:
    with m.grant((R.GROUP, "m-leave-g", Op.READ)):
        member, _ = _joined(m.alice, "m-leave-g")

    def ask() -> ErrorCode:
        return ErrorCode(m.alice.req(13, 4, group_id="m-leave-g", members=(
            m.alice.kind(13, 4, "MemberIdentity", member_id=member),)).error_code)

    assert ask() == GROUP_DENIED
    members = m.admin.req(15, 5, groups=("m-leave-g",)).groups[0].members
    assert [x.member_id for x in members] == [member]  # still a member
    with m.grant((R.GROUP, "m-leave-g", Op.READ)):
        assert ask() == OK
    assert m.group_state("m-leave-g") == "Empty"


@case(14)
def _sync_group(m: Matrix) -> None:
    with m.grant((R.GROUP, "m-sync-g", Op.READ)):
        member, generation = _joined(m.alice, "m-sync-g")
    assert _sync(m.alice, "m-sync-g", member, generation).error_code == GROUP_DENIED
    assert m.group_state("m-sync-g") == "CompletingRebalance"  # no assignment taken
    with m.grant((R.GROUP, "m-sync-g", Op.READ)):
        assert _sync(m.alice, "m-sync-g", member, generation).error_code == OK
    assert m.group_state("m-sync-g") == "Stable"


@case(15)
def _describe_groups(m: Matrix) -> None:
    def ask() -> Any:
        return m.alice.req(15, 5, groups=("m-describe-g",),
                           include_authorized_operations=True).groups[0]

    assert ask().error_code == GROUP_DENIED
    with m.grant((R.GROUP, "m-describe-g", Op.DESCRIBE)):
        group = ask()
    assert group.error_code == OK
    assert group.authorized_operations == 1 << Op.DESCRIBE.value  # the flag: what it may do


@case(16)
def _list_groups(m: Matrix) -> None:
    m.create_topic("m-list-groups")
    assert codes(m.commit(m.admin, "m-list-groups-g", "m-list-groups", 1)) == {OK}

    def listed() -> set[str]:
        response = m.alice.req(16, 4)
        assert response.error_code == OK
        return {g.group_id for g in response.groups}

    assert "m-list-groups-g" not in listed()  # filtered, not refused
    with m.grant((R.GROUP, "m-list-groups-g", Op.DESCRIBE)):
        assert "m-list-groups-g" in listed()


@case(42)
def _delete_groups(m: Matrix) -> None:
    m.create_topic("m-delete-groups")
    assert codes(m.commit(m.admin, "m-delete-groups-g", "m-delete-groups", 1)) == {OK}

    def ask() -> ErrorCode:
        return ErrorCode(m.alice.req(42, 2, groups_names=("m-delete-groups-g",))
                         .results[0].error_code)

    assert ask() == GROUP_DENIED
    assert m.committed("m-delete-groups-g", "m-delete-groups") == 1  # still there
    with m.grant((R.GROUP, "m-delete-groups-g", Op.DELETE)):
        assert ask() == OK
    assert m.committed("m-delete-groups-g", "m-delete-groups") == -1


@case(47)
def _offset_delete(m: Matrix) -> None:
    m.create_topic("m-offset-delete")
    assert codes(m.commit(m.admin, "m-offset-delete-g", "m-offset-delete", 1)) == {OK}

    def ask() -> Any:
        return m.alice.req(47, 0, group_id="m-offset-delete-g", topics=(m.alice.kind(
            47, 0, "OffsetDeleteRequestTopic", name="m-offset-delete", partitions=(
                m.alice.kind(47, 0, "OffsetDeleteRequestPartition", partition_index=0),)),))

    assert ask().error_code == GROUP_DENIED
    assert m.committed("m-offset-delete-g", "m-offset-delete") == 1
    with m.grant((R.GROUP, "m-offset-delete-g", Op.DELETE),
                 (R.TOPIC, "m-offset-delete", Op.READ)):
        assert codes(ask()) == {OK}
    assert m.committed("m-offset-delete-g", "m-offset-delete") == -1


@case(68)
def _consumer_group_heartbeat(m: Matrix) -> None:
    def ask() -> Any:
        return m.alice.req(68, 0, group_id="m-cg-g", member_id=str(uuid.uuid4()),
                           member_epoch=0, rebalance_timeout=30_000 * MS,
                           subscribed_topic_names=("m-cg",), topic_partitions=())

    assert ask().error_code == GROUP_DENIED
    assert m.admin.req(69, 0, group_ids=("m-cg-g",)).groups[0].error_code == \
        ErrorCode.group_id_not_found
    with m.grant((R.GROUP, "m-cg-g", Op.READ)):
        response = ask()
    assert response.error_code == OK and response.member_epoch >= 1


@case(69)
def _consumer_group_describe(m: Matrix) -> None:
    def ask() -> ErrorCode:
        return ErrorCode(m.alice.req(69, 0, group_ids=("m-cgd-g",)).groups[0].error_code)

    assert ask() == GROUP_DENIED
    with m.grant((R.GROUP, "m-cgd-g", Op.DESCRIBE)):
        assert ask() not in AUTH_ERRORS  # GROUP_ID_NOT_FOUND: it was looked up
