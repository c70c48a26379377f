"""The classic group APIs on share groups, as Kafka 4.x answers them: DescribeGroups
(Dead, GROUP_ID_NOT_FOUND from v6), ListGroups' `share` type filter, DeleteGroups
(NON_EMPTY_GROUP with members; otherwise the group and its share-partition state go),
and FindCoordinator's key type 2 (the share coordinator of a share-partition)."""

from __future__ import annotations

from typing import Any

import pytest

from odradek.coordinator.share.state import kafka_uuid
from tests.conftest import BrokerProcess
from tests.share.test_share_wire import ACCEPT
from tests.wire import WireClient

INVALID_REQUEST = 42
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69


def start_offset(c: WireClient, group: str, topic: str) -> int:
    s = c.schema(90, 0)
    r = c.call(90, 0, groups=(s.DescribeShareGroupOffsetsRequestGroup(
        group_id=group, topics=(s.DescribeShareGroupOffsetsRequestTopic(
            topic_name=topic, partitions=(0,)),)),))
    p = r.groups[0].topics[0].partitions[0]
    assert p.error_code == 0, r
    return int(p.start_offset)


def listed(c: WireClient, *types: str) -> dict[str, tuple[str, str, str]]:
    r = c.call(16, 5, states_filter=(), types_filter=types)
    assert r.error_code == 0
    return {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in r.groups}


def test_describe_list_and_delete_a_share_group(holder: Any) -> None:
    c, m1, topic = holder
    group = m1.group
    # DescribeGroups is for classic groups: v6 says so, older versions answer Dead
    g6 = c.call(15, 6, groups=(group,), include_authorized_operations=False).groups[0]
    assert (g6.error_code, g6.group_state, g6.protocol_type) == (GROUP_ID_NOT_FOUND, "Dead", "")
    assert g6.error_message == f"Group {group} is not a classic group."
    g5 = c.call(15, 5, groups=(group,), include_authorized_operations=False).groups[0]
    assert (g5.error_code, g5.group_state, g5.members) == (0, "Dead", ())

    assert listed(c, "share")[group] == ("share", "Stable", "share")
    assert group not in listed(c, "consumer", "classic")

    def delete() -> int:
        return int(c.call(42, 2, groups_names=(group,)).results[0].error_code)

    assert delete() == NON_EMPTY_GROUP
    assert m1.ack([(0, 2, (ACCEPT,))]).error_code == 0
    assert start_offset(c, group, topic) == 3  # the state is written
    left = c.call(76, 1, group_id=group, member_id=m1.member, member_epoch=-1,
                  rack_id=None, subscribed_topic_names=None)
    assert left.error_code == 0
    assert listed(c, "share")[group][1] == "Empty"

    assert delete() == 0
    assert start_offset(c, group, topic) == -1  # DeleteShareGroupState: no state left
    assert group not in listed(c)
    assert delete() == GROUP_ID_NOT_FOUND


def test_find_the_share_coordinator_of_a_share_partition(share_broker: BrokerProcess) -> None:
    import uuid

    key = f"g1:{kafka_uuid(uuid.uuid4())}:0"
    with WireClient(share_broker.bootstrap) as c:
        r = c.call(10, 6, key_type=2, coordinator_keys=(key, "g1:nope:0", "g1", "g1:x:0:1"))
        found, *bad = r.coordinators
        assert (found.error_code, found.port) == (0, int(share_broker.bootstrap.split(":")[1]))
        assert found.node_id >= 0
        assert [(k.key, k.error_code) for k in bad] == [
            ("g1:nope:0", INVALID_REQUEST), ("g1", INVALID_REQUEST),
            ("g1:x:0:1", INVALID_REQUEST)]
        # key type 2 needs v6, as Kafka's request builder enforces
        assert c.call(10, 5, key_type=2, coordinator_keys=(key,)).coordinators[0].error_code \
            == INVALID_REQUEST
        topics = c.call(3, 12, topics=None, allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False).topics
        assert "__share_group_state" in {t.name for t in topics}


def test_share_groups_delete_as_kafka_share_groups_sh(holder: Any,
                                                      share_broker: BrokerProcess) -> None:
    from typer.testing import CliRunner

    from odradek.cli import share_groups

    c, m1, topic = holder
    b = share_broker.bootstrap
    runner = CliRunner()
    refused = runner.invoke(share_groups.app, ["delete", m1.group, "-b", b])
    assert refused.exit_code == 1
    assert f"Share group '{m1.group}' could not be deleted due to: NON_EMPTY_GROUP" \
        in refused.output
    assert m1.ack([(0, 2, (ACCEPT,))]).error_code == 0
    c.call(76, 1, group_id=m1.group, member_id=m1.member, member_epoch=-1, rack_id=None,
           subscribed_topic_names=None)
    done = runner.invoke(share_groups.app, ["delete", m1.group, "-b", b])
    assert done.exit_code == 0, done.output
    assert f"Deletion of requested share groups ('{m1.group}') was successful." in done.output
    assert start_offset(c, m1.group, topic) == -1
    assert m1.group not in runner.invoke(share_groups.app, ["list", "-b", b]).output


def test_share_group_lag_in_odradek_lag_and_describe(holder: Any,
                                                    share_broker: BrokerProcess) -> None:
    from typer.testing import CliRunner

    from odradek.cli import lag, share_groups
    from tests.share.test_share_wire import RELEASE, acquired

    _, m1, topic = holder
    b, runner = share_broker.bootstrap, CliRunner()
    # 0 accepted, 1-2 released: the start offset is 1 and two records are left
    assert m1.ack([(0, 0, (ACCEPT,)), (1, 2, (RELEASE,))]).error_code == 0
    stuck = runner.invoke(lag.app, [m1.group, "--samples", "2", "--interval", "0.1", "-b", b])
    assert "total lag 2" in stuck.output, stuck.output
    assert [topic, "0", "2", "STALL"] in [line.split() for line in stuck.output.splitlines()]
    assert stuck.exit_code == 2  # a member is there but the start offset does not move
    described = runner.invoke(share_groups.app, ["describe", m1.group, "-b", b],
                              terminal_width=250)
    assert described.output.splitlines()[1].split()[4:] == ["1", "2"], described.output

    got: list[tuple[int, int, int]] = []
    while sum(last - first + 1 for first, last, _ in got) < 2:
        r = m1.fetch(wait_ms=5000)
        assert r.error_code == 0, r
        got += acquired(r)
    assert m1.ack([(1, 2, (ACCEPT,))]).error_code == 0
    caught_up = runner.invoke(lag.app, [m1.group, "--samples", "1", "-b", b])
    assert caught_up.exit_code == 0 and "total lag 0" in caught_up.output, caught_up.output


def test_confluent_admin_deletes_a_share_group_a_share_consumer_used(
        share_broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from tests.share.helpers import (
        earliest_group,
        new_topic,
        poll_until,
        produce,
        share_consumer,
        wait_for,
    )

    b = share_broker.bootstrap
    topic, group = new_topic(b), earliest_group(b)
    produce(b, topic, ["a", "b", "c"])
    admin = AdminClient({"bootstrap.servers": b})
    with share_consumer(b, group, topic, explicit=False) as consumer:
        poll_until(consumer, lambda seen: len(seen) >= 3)
        assert all(e is None for e in consumer.commit_sync(30).values())
        with pytest.raises(KafkaException) as refused:
            admin.delete_consumer_groups([group])[group].result(30)
        assert refused.value.args[0].code() == NON_EMPTY_GROUP
    with WireClient(b) as c:
        assert start_offset(c, group, topic) == 3
        wait_for(lambda: listed(c, "share").get(group, ("", "Stable"))[1] == "Empty" or None,
                 30, "the share consumer did not leave")
        admin.delete_consumer_groups([group])[group].result(30)
        assert start_offset(c, group, topic) == -1
        assert group not in listed(c)
