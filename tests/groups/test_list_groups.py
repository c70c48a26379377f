"""ListGroups from its encoded group entries (server/encoded_entries.py): every version
and filter answers byte for byte what the whole response encodes to, and a group that
joins, empties or is deleted shows in the very next answer after the cache was warmed."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import ConsumerGroupState, ConsumerGroupType
from confluent_kafka.admin import AdminClient

from odradek.protocol.client_framing import decode_response
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import encode_response
from tests.clients.test_confluent_kafka import create_topic
from tests.conftest import BrokerProcess
from tests.groups.test_migration import classic_member, consumer_heartbeat
from tests.wire import WireClient

LIST_GROUPS = 16


def unique(prefix: str, topic_name: str) -> str:
    return f"{prefix}-{topic_name}"


def list_groups(c: WireClient, version: int, **filters: Any) -> tuple[Any, bytes, int]:
    """(decoded response, frame without its size prefix, correlation id)."""
    cid, request = c.framing.build(LIST_GROUPS, version, **filters)
    c.send_raw(request)
    frame = c.read_frame()
    return decode_response(LIST_GROUPS, version, frame, cid), frame, cid


def coordinated(c: WireClient, group: str) -> str:
    """`group`, once this broker answers as its coordinator (the offsets topic is made
    and loaded on the first FindCoordinator)."""
    deadline = time.monotonic() + 60
    while c.call(10, 3, key=group, key_type=0).error_code != ErrorCode.none:
        assert time.monotonic() < deadline, f"no coordinator for {group}"
        time.sleep(0.05)
    return group


def commit_only(c: WireClient, group: str, topic: str) -> None:
    """An Empty group: offsets committed without a member (as an admin tool does)."""
    s = c.schema(8, 8)
    r = c.call(8, 8, group_id=group, generation_id_or_member_epoch=-1, member_id="",
               group_instance_id=None, topics=(s.OffsetCommitRequestTopic(
                   name=topic, partitions=(s.OffsetCommitRequestPartition(
                       partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                       committed_metadata=""),)),))
    assert r.topics[0].partitions[0].error_code == ErrorCode.none


def test_every_version_and_filter_is_the_whole_response_encoded(
        group_broker: BrokerProcess, topic_name: str) -> None:
    create_topic(group_broker.bootstrap, topic_name, partitions=1)
    stable, empty, consumer = (unique(p, topic_name) for p in ("stable", "empty", "kip848"))
    with WireClient(group_broker.bootstrap) as c:
        for group in (stable, empty, consumer):
            coordinated(c, group)
        classic_member(c, stable, "consumer", b"")
        commit_only(c, empty, topic_name)
        assert consumer_heartbeat(c, consumer, "", 0, (topic_name,)).error_code == 0
        mine = {stable, empty, consumer}
        cases: list[tuple[int, dict[str, Any], set[str]]] = [
            (v, {}, mine) for v in range(4)]
        for v in (4, 5):
            extra: dict[str, Any] = {"types_filter": ()} if v == 5 else {}
            cases += [(v, {"states_filter": (), **extra}, mine),
                      (v, {"states_filter": ("Empty",), **extra}, {empty}),
                      (v, {"states_filter": ("stable", "EMPTY"), **extra}, {stable, empty})]
        cases += [(5, {"states_filter": (), "types_filter": ("consumer",)}, {consumer}),
                  (5, {"states_filter": (), "types_filter": ("Classic",)}, {stable, empty}),
                  (5, {"states_filter": ("Empty",), "types_filter": ("consumer",)}, set())]
        for version, filters, expected in cases:
            for _ in range(2):  # built, then from the cache
                resp, frame, cid = list_groups(c, version, **filters)
                assert resp.error_code == ErrorCode.none
                listed = {g.group_id: g for g in resp.groups}
                # the KIP-848 member's state moves with its heartbeats: only its type
                # is certain here
                assert {stable, empty} & listed.keys() == expected - {consumer}, filters
                if not filters.get("states_filter"):
                    assert (consumer in listed) == (consumer in expected), filters
                whole = encode_response(LIST_GROUPS, version, cid, resp)
                assert bytes(frame) == whole[4:], f"ListGroups v{version} {filters} differs"
            if version >= 5 and consumer in listed:
                assert (listed[consumer].protocol_type,
                        listed[consumer].group_type) == ("consumer", "consumer")
            if stable in listed:
                assert listed[stable].protocol_type == "consumer"
                if version >= 4:
                    assert listed[stable].group_state == "Stable"


def listed(admin: AdminClient, **kwargs: Any) -> dict[str, Any]:
    result = admin.list_consumer_groups(request_timeout=15, **kwargs).result(30)
    assert not result.errors
    return {g.group_id: g for g in result.valid}


def test_a_state_change_and_a_deletion_show_in_the_next_answer(
        group_broker: BrokerProcess, topic_name: str) -> None:
    create_topic(group_broker.bootstrap, topic_name, partitions=1)
    classic, consumer = unique("classic", topic_name), unique("kip848", topic_name)
    admin = AdminClient({"bootstrap.servers": group_broker.bootstrap})
    with WireClient(group_broker.bootstrap) as c:
        coordinated(c, classic), coordinated(c, consumer)
        member_id, _ = classic_member(c, classic, "consumer", b"")
        joined = consumer_heartbeat(c, consumer, "", 0, (topic_name,))
        assert joined.error_code == ErrorCode.none
        for _ in range(2):  # warm the entries
            groups = listed(admin)
        assert groups[classic].state == ConsumerGroupState.STABLE
        assert groups[classic].type == ConsumerGroupType.CLASSIC
        assert groups[consumer].type == ConsumerGroupType.CONSUMER
        assert classic in listed(admin, states={ConsumerGroupState.STABLE})

        s = c.schema(13, 3)
        left = c.call(13, 3, group_id=classic, members=(
            s.MemberIdentity(member_id=member_id, group_instance_id=None),))
        assert left.error_code == ErrorCode.none
        assert listed(admin)[classic].state == ConsumerGroupState.EMPTY
        assert classic in listed(admin, states={ConsumerGroupState.EMPTY})
        assert classic not in listed(admin, states={ConsumerGroupState.STABLE})

        gone = consumer_heartbeat(c, consumer, joined.member_id, -1, None)
        # (a member this slow to leave may have been fenced already: Empty all the same)
        assert gone.error_code in (ErrorCode.none, ErrorCode.unknown_member_id)
        assert listed(admin)[consumer].state == ConsumerGroupState.EMPTY

        deleted = admin.delete_consumer_groups([classic, consumer], request_timeout=15)
        for future in deleted.values():
            future.result(30)
        groups = listed(admin)
        assert classic not in groups and consumer not in groups
