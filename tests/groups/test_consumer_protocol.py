"""KIP-848 groups (`group.protocol=consumer`) with confluent-kafka: the broker assigns
with `uniform` or `range`, members reconcile by epochs, partitions move only after their
old owner revoked them."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.conftest import BrokerProcess
from tests.groups.helpers import (
    Member,
    balanced,
    create_topic,
    describe_group,
    grow_topic,
    member,
    poll_until,
    produce,
    unique,
)
from tests.processes import reap_on_exit

CONSUMER = {"group.protocol": "consumer"}


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_three_members_share_a_topic_then_one_joins_and_one_leaves(
        group_broker: BrokerProcess, assignor: str) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("kip848"), unique("g")
    create_topic(bootstrap, topic, 6)
    produce(bootstrap, topic, 60, 6)
    conf = {**CONSUMER, "group.remote.assignor": assignor}
    members = [member(bootstrap, group, topic, f"c{i}", **conf) for i in range(3)]
    took = poll_until(members, balanced(members, 6), 20)
    print(f"\n[{assignor}] three members assigned in {took:.2f}s")
    poll_until(members, lambda: sum(len(m.messages) for m in members) >= 60, 20)
    fourth = member(bootstrap, group, topic, "c3", **conf)
    members.append(fourth)
    took = poll_until(members, balanced(members, 6), 20)
    print(f"[{assignor}] a fourth member joined: reconciled in {took:.2f}s")
    leaving = members.pop(0)
    leaving.close()
    took = poll_until(members, balanced(members, 6), 20)
    print(f"[{assignor}] a member left: reconciled in {took:.2f}s")
    # Members ack the new epoch on their next heartbeat; until then the group is
    # Reconciling, which librdkafka reports as UNKNOWN.
    desc = settled(members, bootstrap, group)
    assert desc.state.name == "STABLE"
    assert sorted(tp.partition for m in desc.members
                  for tp in m.assignment.topic_partitions) == list(range(6))
    for m in members:
        m.close()


def test_kept_partitions_are_never_revoked(group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("kept"), unique("g")
    create_topic(bootstrap, topic, 4)
    first = member(bootstrap, group, topic, "first", **CONSUMER)
    poll_until([first], lambda: len(first.assigned) == 4, 20)
    second = member(bootstrap, group, topic, "second", **CONSUMER)
    poll_until([first, second], balanced([first, second], 4), 20)
    revoked = {p for _, kind, ps in first.events if kind == "revoke" for p in ps}
    assert revoked == set(second.assigned)
    assert not (revoked & first.assigned)
    first.close()
    second.close()


def settled(members: list[Member], bootstrap: str, group: str) -> Any:
    deadline = time.monotonic() + 15
    while True:
        desc = describe_group(bootstrap, group)
        if desc.state.name == "STABLE" or time.monotonic() > deadline:
            return desc
        for m in members:
            m.poll(0.1)


KILLABLE = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
              "group.protocol": "consumer", "auto.offset.reset": "earliest"})
c.subscribe([sys.argv[3]], on_assign=lambda c, ps: ps and print("assigned", flush=True))
while True:
    c.poll(0.1)
"""


def test_sigkilled_member_partitions_move_after_the_session_timeout(
        group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("kill848"), unique("g")
    create_topic(bootstrap, topic, 4)
    doomed = subprocess.Popen([sys.executable, "-c", KILLABLE, bootstrap, group, topic],
                              stdout=subprocess.PIPE, text=True)
    reap_on_exit(doomed)
    survivor = None
    try:
        assert doomed.stdout is not None
        assert doomed.stdout.readline().strip() == "assigned"
        survivor = member(bootstrap, group, topic, "survivor", **CONSUMER)
        poll_until([survivor], lambda: len(survivor.assigned) == 2, 20)
        doomed.kill()
        doomed.wait(5)
        killed_at = time.monotonic()
        poll_until([survivor], lambda: len(survivor.assigned) == 4, 15)
        moved = time.monotonic() - killed_at
        print(f"\nKIP-848: partitions of the SIGKILLed member moved after {moved:.2f}s "
              "(group.consumer.session.timeout.ms=6000)")
        assert 5.0 <= moved <= 9.0
    finally:
        doomed.kill()
        if survivor is not None:
            survivor.close()


def test_static_member_restarted_keeps_its_partitions(group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("static848"), unique("g")
    create_topic(bootstrap, topic, 4)
    a = member(bootstrap, group, topic, "a", **CONSUMER, **{"group.instance.id": "pod-a"})
    b = member(bootstrap, group, topic, "b", **CONSUMER, **{"group.instance.id": "pod-b"})
    poll_until([a, b], balanced([a, b], 4), 20)
    before, b_events = set(a.assigned), len(b.events)
    a.close()
    back = member(bootstrap, group, topic, "a", **CONSUMER, **{"group.instance.id": "pod-a"})
    took = poll_until([back, b], lambda: back.assigned == before, 10)
    print(f"\nKIP-848 static member back with {sorted(before)} in {took:.2f}s")
    assert len(b.events) == b_events, f"b was disturbed: {b.events[b_events:]}"
    back.close()
    b.close()


def test_commit_and_resume(group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("resume848"), unique("g")
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, 30, 2)
    c = member(bootstrap, group, topic, "c", **CONSUMER)
    poll_until([c], lambda: len(c.messages) >= 30, 20)
    c.consumer.commit(asynchronous=False)
    c.close()
    committed = Consumer({"bootstrap.servers": bootstrap, "group.id": group}).committed(
        [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
    assert sorted(tp.offset for tp in committed) == [15, 15]
    produce(bootstrap, topic, 4, 2)
    again = member(bootstrap, group, topic, "again", **CONSUMER)
    poll_until([again], lambda: len(again.messages) >= 4, 20)
    assert sorted((p, o) for _, p, o in again.messages) == [(0, 15), (0, 16), (1, 15), (1, 16)]
    again.close()


def test_partition_growth_is_assigned(group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("grow848"), unique("g")
    create_topic(bootstrap, topic, 2)
    members = [member(bootstrap, group, topic, f"c{i}", **CONSUMER) for i in range(2)]
    poll_until(members, balanced(members, 2), 20)
    grow_topic(bootstrap, topic, 4)
    took = poll_until(members, balanced(members, 4), 20)
    print(f"\nKIP-848 partition growth 2 → 4 assigned in {took:.2f}s")
    for m in members:
        m.close()
