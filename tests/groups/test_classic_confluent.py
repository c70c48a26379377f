"""Classic groups with confluent-kafka (librdkafka 2.16): every assignor, members coming
and going, static membership, commits and partition growth."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.conftest import BrokerProcess
from tests.groups.helpers import (
    SESSION_MS,
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

ASSIGNORS = ["range", "roundrobin", "cooperative-sticky"]


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_three_consumers_share_a_topic_then_one_joins_and_one_leaves(
        group_broker: BrokerProcess, assignor: str) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("share"), unique("g")
    create_topic(bootstrap, topic, 6)
    produce(bootstrap, topic, 60, 6)
    conf = {"partition.assignment.strategy": assignor}
    members = [member(bootstrap, group, topic, f"c{i}", **conf) for i in range(3)]
    took = poll_until(members, balanced(members, 6), 20)
    print(f"\n[{assignor}] three consumers assigned in {took:.2f}s")
    assert all(len(m.assigned) == 2 for m in members)
    poll_until(members, lambda: sum(len(m.messages) for m in members) >= 60, 20)

    fourth = member(bootstrap, group, topic, "c3", **conf)
    members.append(fourth)
    took = poll_until(members, balanced(members, 6), 20)
    print(f"[{assignor}] a fourth member joined: rebalanced in {took:.2f}s")
    assert fourth.assigned

    leaving = members.pop(0)
    leaving.close()
    took = poll_until(members, balanced(members, 6), 20)
    print(f"[{assignor}] a member left: rebalanced in {took:.2f}s")
    assert all(len(m.assigned) == 2 for m in members)
    for m in members:
        m.close()


def test_group_is_described_with_members_and_assignments(group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("desc"), unique("g")
    create_topic(bootstrap, topic, 4)
    members = [member(bootstrap, group, topic, f"c{i}") for i in range(2)]
    poll_until(members, balanced(members, 4), 20)
    desc = describe_group(bootstrap, group)
    assert desc.state.name == "STABLE"
    assert desc.partition_assignor == "range"
    assert sorted(m.client_id for m in desc.members) == ["c0", "c1"]
    owned = sorted(tp.partition for m in desc.members for tp in m.assignment.topic_partitions)
    assert owned == [0, 1, 2, 3]
    assert all(m.host == "/127.0.0.1" for m in desc.members)
    for m in members:
        m.close()


KILLABLE = f"""
import sys, time
from confluent_kafka import Consumer
c = Consumer({{"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
              "session.timeout.ms": {SESSION_MS}, "heartbeat.interval.ms": 500,
              "auto.offset.reset": "earliest", "client.id": "doomed"}})
c.subscribe([sys.argv[3]], on_assign=lambda c, ps: print("assigned", flush=True))
while True:
    c.poll(0.1)
"""


def test_sigkilled_member_partitions_move_after_the_session_timeout(
        group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("kill"), unique("g")
    create_topic(bootstrap, topic, 4)
    survivor = member(bootstrap, group, topic, "survivor")
    doomed = subprocess.Popen([sys.executable, "-c", KILLABLE, bootstrap, group, topic],
                              stdout=subprocess.PIPE, text=True)
    reap_on_exit(doomed)
    try:
        assert doomed.stdout is not None
        # the survivor must keep polling while the doomed member joins: an eager
        # rebalance waits for it to give its partitions back
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(doomed.stdout.readline()))
        reader.start()
        poll_until([survivor], lambda: bool(line), 60)
        assert line[0].strip() == "assigned"
        poll_until([survivor], lambda: len(survivor.assigned) == 2, 20)
        doomed.kill()
        doomed.wait(5)
        killed_at = time.monotonic()
        poll_until([survivor], lambda: len(survivor.assigned) == 4, SESSION_MS / 1000 + 10)
        moved_after = time.monotonic() - killed_at
        print(f"\npartitions of the SIGKILLed member moved after {moved_after:.2f}s "
              f"(session.timeout.ms={SESSION_MS})")
        # not before its session ran out, and not much after
        assert SESSION_MS / 1000 - 1.0 <= moved_after <= SESSION_MS / 1000 + 4
    finally:
        doomed.kill()
        survivor.close()


def test_cooperative_sticky_keeps_consuming_partitions_that_stay(
        group_broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    bootstrap = group_broker.bootstrap
    topic, group = unique("coop"), unique("g")
    create_topic(bootstrap, topic, 6)
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    first = member(bootstrap, group, topic, "first", **conf)
    poll_until([first], lambda: len(first.assigned) == 6, 20)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    second = member(bootstrap, group, topic, "second", **conf)
    joined = time.monotonic()
    members = [first, second]
    sent = 0
    while not balanced(members, 6)() and time.monotonic() - joined < 20:
        for p in range(6):
            producer.produce(topic, value=b"x", partition=p)
            sent += 1
        producer.poll(0)
        for m in members:
            m.poll(0.02)
    settled = time.monotonic()
    assert balanced(members, 6)(), "the group did not settle"
    kept = first.assigned
    revoked = [set(ps) for _, kind, ps in first.events if kind == "revoke"]
    assert revoked and all(not (r & kept) for r in revoked), "kept partitions were revoked"
    during = {p for t, p, _ in first.messages if joined < t < settled}
    print(f"\ncooperative rebalance took {settled - joined:.2f}s; first kept {sorted(kept)} "
          f"and consumed {sorted(during & kept)} meanwhile")
    assert during & kept, "the partitions that stayed were not consumed during the rebalance"
    for m in members:
        m.close()


def test_static_member_restarted_within_session_keeps_partitions_without_rebalance(
        group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("static"), unique("g")
    create_topic(bootstrap, topic, 4)
    a = member(bootstrap, group, topic, "a", **{"group.instance.id": "pod-a"})
    b = member(bootstrap, group, topic, "b", **{"group.instance.id": "pod-b"})
    poll_until([a, b], balanced([a, b], 4), 20)
    before = set(a.assigned)
    b_events = len(b.events)
    a.close()  # a static member sends no LeaveGroup: its place is kept
    restarted = member(bootstrap, group, topic, "a", **{"group.instance.id": "pod-a"})
    took = poll_until([restarted, b], lambda: restarted.assigned == before, SESSION_MS / 1000)
    print(f"\nstatic member back with {sorted(before)} in {took:.2f}s")
    # and nobody else noticed: b got no revoke or assign
    quiet_until = time.monotonic() + 2
    while time.monotonic() < quiet_until:
        for m in (restarted, b):
            m.poll(0.05)
    assert len(b.events) == b_events, f"b was rebalanced: {b.events[b_events:]}"
    assert restarted.assigned == before
    restarted.close()
    b.close()


@pytest.mark.parametrize("auto_commit", [True, False], ids=["auto-commit", "manual-commit"])
def test_a_restarted_consumer_resumes_at_the_committed_offset(
        group_broker: BrokerProcess, auto_commit: bool) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("resume"), unique("g")
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, 40, 2)
    conf = {"enable.auto.commit": auto_commit, "auto.commit.interval.ms": 200}
    c = member(bootstrap, group, topic, "c", **conf)
    poll_until([c], lambda: len(c.messages) >= 20, 20)
    seen = {(p, o) for _, p, o in c.messages}
    if not auto_commit:
        c.consumer.commit(asynchronous=False)
    c.close()  # close commits the auto-committed positions too
    committed = Consumer({"bootstrap.servers": bootstrap, "group.id": group}).committed(
        [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
    positions = {tp.partition: max(tp.offset, 0) for tp in committed}  # -1001: none yet
    assert sum(positions.values()) == len(seen)
    produce(bootstrap, topic, 10, 2)
    again = member(bootstrap, group, topic, "again", **conf)
    poll_until([again], lambda: len(again.messages) >= 50 - len(seen), 20)
    resumed = {(p, o) for _, p, o in again.messages}
    assert not (resumed & seen), "records delivered twice after a clean commit"
    assert len(seen) + len(resumed) == 50
    again.close()


def test_partition_growth_triggers_a_rebalance(group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("grow"), unique("g")
    create_topic(bootstrap, topic, 2)
    members = [member(bootstrap, group, topic, f"c{i}") for i in range(2)]
    poll_until(members, balanced(members, 2), 20)
    grow_topic(bootstrap, topic, 4)
    took = poll_until(members, balanced(members, 4), 20)
    print(f"\npartition growth 2 → 4 rebalanced in {took:.2f}s")
    for m in members:
        m.close()
