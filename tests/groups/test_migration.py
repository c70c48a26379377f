"""KIP-848 online migration with real clients: a classic group upgraded member by
member to the consumer protocol and back, consuming throughout, and Kafka's refusals."""

from __future__ import annotations

import itertools
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka import ConsumerGroupType as GroupType
from kafka import KafkaConsumer

from odradek.protocol.errors import ErrorCode
from odradek.protocol.group_records import decode_consumer_assignment
from tests.conftest import BrokerProcess
from tests.groups.conftest import GROUP_OVERRIDES
from tests.groups.helpers import create_topic, describe_group, unique
from tests.wire import WireClient

PARTITIONS = 6


@dataclass
class Worker:
    """A consumer that commits each record before taking the next (so a record is
    delivered twice only when its commit failed: at-least-once, nothing more)."""

    name: str
    consumer: Consumer
    protocol: str
    assigned: set[int] = field(default_factory=set)
    seen: list[tuple[int, int]] = field(default_factory=list)  # (partition, offset)
    times: list[float] = field(default_factory=list)  # when each was seen
    committed: set[tuple[int, int]] = field(default_factory=set)
    failed_commits: set[tuple[int, int]] = field(default_factory=set)
    closed: bool = False

    def on_assign(self, c: Any, parts: list[TopicPartition]) -> None:
        ps = {p.partition for p in parts}
        self.assigned = self.assigned | ps if self.incremental else ps

    def on_revoke(self, c: Any, parts: list[TopicPartition]) -> None:
        ps = {p.partition for p in parts}
        self.assigned = self.assigned - ps if self.incremental else set()

    @property
    def incremental(self) -> bool:
        return self.protocol == "consumer"

    def poll(self) -> None:
        m = self.consumer.poll(0.02)
        if m is None or m.error() is not None:
            return
        tp = (m.partition(), m.offset())
        self.seen.append(tp)
        self.times.append(time.monotonic())
        try:
            self.consumer.commit(message=m, asynchronous=False)
            self.committed.add(tp)
        except KafkaException:
            self.failed_commits.add(tp)

    def close(self) -> None:
        self.consumer.close()
        self.closed = True


def worker(bootstrap: str, group: str, topic: str, name: str, protocol: str) -> Worker:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "group.protocol": protocol, "topic.metadata.refresh.interval.ms": 1000}
    if protocol == "classic":
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
    w = Worker(name, Consumer(conf), protocol)
    w.consumer.subscribe([topic], on_assign=w.on_assign, on_revoke=w.on_revoke)
    return w


class Fleet:
    """Workers polled in turn while a producer keeps writing."""

    def __init__(self, bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
        self.partitions = partitions
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
        self.topic = topic
        self.produced = 0
        self.workers: list[Worker] = []

    @property
    def live(self) -> list[Worker]:
        return [w for w in self.workers if not w.closed]

    def step(self) -> None:
        for _ in range(3):
            self.producer.produce(self.topic, value=f"r{self.produced}".encode(),
                                  partition=self.produced % self.partitions)
            self.produced += 1
        self.producer.poll(0)
        for w in self.live:
            w.poll()

    def consumed(self) -> int:
        return len({tp for w in self.workers for tp in w.seen})

    def run_until(self, done: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.step()
            if done():
                return
        raise AssertionError(f"not {what} within {timeout}s: " + "; ".join(
            f"{w.name}({w.protocol})={sorted(w.assigned)}" for w in self.live))

    def balanced(self) -> bool:
        owned = [w.assigned for w in self.live]
        flat = sorted(p for s in owned for p in s)
        return flat == list(range(PARTITIONS)) and max(map(len, owned)) - min(
            map(len, owned)) <= 1

    def settle(self, what: str) -> None:
        """Balanced, and every live member is consuming."""
        self.run_until(self.balanced, 45, f"balanced after {what}")
        marks = {w.name: len(w.seen) for w in self.live}
        self.run_until(lambda: all(len(w.seen) > marks[w.name] for w in self.live
                                   if w.assigned), 30, f"consuming after {what}")


def group_type(bootstrap: str, group: str) -> GroupType:
    return describe_group(bootstrap, group).type


def test_rolling_upgrade_to_the_consumer_protocol_and_back(
        group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("migrate"), unique("g")
    create_topic(bootstrap, topic, PARTITIONS)
    fleet = Fleet(bootstrap, topic)
    try:
        fleet.workers = [worker(bootstrap, group, topic, f"c{i}", "classic") for i in range(3)]
        fleet.settle("three classic members joined")
        assert group_type(bootstrap, group) == GroupType.CLASSIC

        # upgrade: each classic instance is replaced by a consumer-protocol one
        for i in range(3):
            fleet.workers.append(worker(bootstrap, group, topic, f"k{i}", "consumer"))
            fleet.settle(f"k{i} joined")
            if i == 0:
                desc = describe_group(bootstrap, group)
                assert desc.type == GroupType.CONSUMER
                assert len(desc.members) == 4
            fleet.workers[i].close()
            fleet.settle(f"c{i} left")
        assert group_type(bootstrap, group) == GroupType.CONSUMER

        # downgrade: back to the classic protocol, one instance at a time
        for i in range(3):
            fleet.workers.append(worker(bootstrap, group, topic, f"d{i}", "classic"))
            fleet.settle(f"d{i} joined")
            fleet.workers[3 + i].close()
            fleet.settle(f"k{i} left")
        assert group_type(bootstrap, group) == GroupType.CLASSIC

        target = fleet.produced
        fleet.run_until(lambda: fleet.consumed() >= target, 30, "all consumed")
    finally:
        for w in fleet.live:
            w.close()

    seen: dict[tuple[int, int], int] = {}
    for w in fleet.workers:
        for tp in w.seen:
            seen[tp] = seen.get(tp, 0) + 1
    # no gap: every offset of every partition up to what was produced came to someone
    for p in range(PARTITIONS):
        offsets = sorted(o for (q, o) in seen if q == p)
        assert offsets == list(range(len(offsets))), f"partition {p} has a gap"
    assert len(seen) >= target
    # a record came twice only if its first commit failed
    failed = {tp for w in fleet.workers for tp in w.failed_commits}
    twice = {tp for tp, n in seen.items() if n > 1}
    assert twice <= failed, f"redelivered although committed: {sorted(twice - failed)[:10]}"
    times = sorted(t for w in fleet.workers for t in w.times)
    pause = max(b - a for a, b in itertools.pairwise(times))
    print(f"\n{len(seen)} records, {len(twice)} delivered twice "
          f"({len(failed)} commits failed during the rebalances); longest time with no "
          f"record consumed by anyone: {pause * 1000:.0f} ms")


def test_a_kafka_python_member_shares_a_group_with_a_consumer_protocol_member(
        group_broker: BrokerProcess) -> None:
    """kafka-python speaks only the classic protocol: it keeps consuming inside the
    upgraded group (its partitions from the server assignor, through SyncGroup) and
    the group turns classic again when the consumer-protocol member leaves."""
    bootstrap = group_broker.bootstrap
    topic, group = unique("kp-mixed"), unique("g")
    create_topic(bootstrap, topic, 4)
    old = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                        auto_offset_reset="earliest", session_timeout_ms=6000,
                        heartbeat_interval_ms=300, client_id="kafka-python")
    fleet = Fleet(bootstrap, topic, 4)
    seen: list[tuple[int, int]] = []

    def step() -> None:
        fleet.step()
        for records in old.poll(timeout_ms=20).values():
            seen.extend((r.partition, r.offset) for r in records)

    def until(done: Any, what: str) -> None:
        deadline = time.monotonic() + 45
        while not done():
            assert time.monotonic() < deadline, f"not {what}: {old.assignment()}"
            step()

    def old_owns() -> set[int]:
        return {tp.partition for tp in old.assignment()}

    try:
        until(lambda: old_owns() == set(range(4)), "assigned to kafka-python")
        new = worker(bootstrap, group, topic, "k", "consumer")
        fleet.workers.append(new)
        until(lambda: len(old_owns()) == 2 and len(new.assigned) == 2
              and not old_owns() & new.assigned, "shared")
        with WireClient(bootstrap) as w:
            described = w.call(69, 1, group_ids=(group,), include_authorized_operations=False)
        (g,) = described.groups
        assert g.error_code == ErrorCode.none
        assert sorted((m.client_id, m.member_type) for m in g.members) == [
            ("k", 1), ("kafka-python", 0)]
        mark = len(seen)
        until(lambda: len(seen) > mark + 10, "kafka-python consuming in the consumer group")
        new.close()
        until(lambda: old_owns() == set(range(4)), "all back to kafka-python")
        assert group_type(bootstrap, group) == GroupType.CLASSIC
        (desc,) = describe_classic(bootstrap, group)
        assert desc.group_state == "Stable" and desc.protocol_type == "consumer"
        assert [m.client_id for m in desc.members] == ["kafka-python"]
        target = fleet.produced
        fleet.producer.flush(10)
        until(lambda: len(set(seen) | set(new.seen)) >= target, "everything consumed")
    finally:
        old.close()
        for w in fleet.live:
            w.close()


def describe_classic(bootstrap: str, group: str) -> Any:
    with WireClient(bootstrap) as w:
        return w.call(15, 5, groups=(group,), include_authorized_operations=False).groups


def subscription(*topics: str) -> bytes:
    out = b"\x00\x00" + struct.pack(">i", len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + b"\xff\xff\xff\xff"


def classic_member(w: WireClient, group: str, protocol_type: str, metadata: bytes
                   ) -> tuple[str, int]:
    """A classic member through JoinGroup and SyncGroup: (member id, generation)."""
    schema = w.schema(11, 5)

    def join(member_id: str) -> Any:
        return w.call(11, 5, group_id=group, session_timeout=timedelta(seconds=30),
                      rebalance_timeout=timedelta(seconds=30), member_id=member_id,
                      group_instance_id=None, protocol_type=protocol_type,
                      protocols=(schema.JoinGroupRequestProtocol(name="range",
                                                                 metadata=metadata),))

    first = join("")
    assert first.error_code == ErrorCode.member_id_required
    joined = join(first.member_id)
    assert joined.error_code == ErrorCode.none
    s = w.schema(14, 3)
    synced = w.call(14, 3, group_id=group, generation_id=joined.generation_id,
                    member_id=joined.member_id, group_instance_id=None,
                    assignments=(s.SyncGroupRequestAssignment(member_id=joined.member_id,
                                                              assignment=b""),))
    assert synced.error_code == ErrorCode.none
    return joined.member_id, joined.generation_id


def consumer_heartbeat(w: WireClient, group: str, member_id: str, epoch: int,
                       topics: tuple[str, ...] | None) -> Any:
    return w.call(68, 0, group_id=group, member_id=member_id, member_epoch=epoch,
                  instance_id=None, rack_id=None, rebalance_timeout=timedelta(seconds=30),
                  subscribed_topic_names=topics, server_assignor=None, topic_partitions=())


def test_a_heartbeat_of_the_other_protocol_gets_kafkas_error_and_changes_nothing(
        group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic, connect, consumers = unique("bad-migrate"), unique("connect"), unique("g")
    create_topic(bootstrap, topic, 2)
    with WireClient(bootstrap) as w:
        w.call(10, 3, key=connect, key_type=0)
        # a classic group of another embedded protocol (Connect's) cannot be upgraded
        member_id, generation = classic_member(w, connect, "connect", b"\x00\x00")
        r = consumer_heartbeat(w, connect, "", 0, (topic,))
        assert r.error_code == ErrorCode.group_id_not_found
        assert r.error_message == (
            f"Cannot upgrade classic group {connect} to consumer group because the group "
            "does not use the consumer embedded protocol.")
        r = consumer_heartbeat(w, connect, "someone", 3, (topic,))
        assert r.error_code == ErrorCode.group_id_not_found
        assert r.error_message == f"Group {connect} is not a consumer group."
        assert w.call(12, 3, group_id=connect, generation_id=generation, member_id=member_id,
                      group_instance_id=None).error_code == ErrorCode.none
        (desc,) = w.call(15, 5, groups=(connect,), include_authorized_operations=False).groups
        assert (desc.group_state, desc.protocol_type) == ("Stable", "connect")
        assert [m.member_id for m in desc.members] == [member_id]

        # a consumer group refuses classic requests it cannot serve
        joined = consumer_heartbeat(w, consumers, "", 0, (topic,))
        assert joined.error_code == ErrorCode.none
        me = joined.member_id
        schema = w.schema(11, 5)
        r = w.call(11, 5, group_id=consumers, session_timeout=timedelta(seconds=30),
                   rebalance_timeout=timedelta(seconds=30), member_id="",
                   group_instance_id=None, protocol_type="connect",
                   protocols=(schema.JoinGroupRequestProtocol(name="range",
                                                              metadata=b"\x00\x00"),))
        assert r.error_code == ErrorCode.inconsistent_group_protocol
        # the consumer-protocol member is no classic member
        assert w.call(12, 3, group_id=consumers, generation_id=joined.member_epoch,
                      member_id=me, group_instance_id=None).error_code == \
            ErrorCode.unknown_member_id
        assert w.call(14, 3, group_id=consumers, generation_id=joined.member_epoch,
                      member_id=me, group_instance_id=None,
                      assignments=()).error_code == ErrorCode.unknown_member_id
        left = w.call(13, 4, group_id=consumers, members=(
            w.schema(13, 4).MemberIdentity(member_id=me, group_instance_id=None),))
        assert [m.error_code for m in left.members] == [ErrorCode.unknown_member_id]
        # a malformed subscription is no protocol the group supports
        r = w.call(11, 5, group_id=consumers, session_timeout=timedelta(seconds=30),
                   rebalance_timeout=timedelta(seconds=30), member_id="m-1",
                   group_instance_id=None, protocol_type="consumer",
                   protocols=(schema.JoinGroupRequestProtocol(name="range",
                                                              metadata=b"\x00"),))
        assert r.error_code == ErrorCode.inconsistent_group_protocol
        (g,) = w.call(69, 1, group_ids=(consumers,), include_authorized_operations=False).groups
        assert [m.member_id for m in g.members] == [me]
        assert g.group_epoch == joined.member_epoch  # no member came or went
        (g,) = w.call(69, 1, group_ids=(connect,), include_authorized_operations=False).groups
        assert g.error_code == ErrorCode.group_id_not_found
        assert g.error_message == f"Group {connect} is not a consumer group."


@pytest.fixture(scope="module")
def no_migration_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    # the policy is read case-insensitively, as Kafka's
    b = BrokerProcess(tmp_path_factory.mktemp("no-migration") / "data", overrides={
        **GROUP_OVERRIDES, "group.consumer.migration.policy": "Disabled"}).start()
    yield b
    b.stop()


def test_with_the_policy_disabled_a_classic_group_is_not_upgraded(
        no_migration_broker: BrokerProcess) -> None:
    bootstrap = no_migration_broker.bootstrap
    topic, group = unique("no-upgrade"), unique("g")
    create_topic(bootstrap, topic, 2)
    with WireClient(bootstrap) as w:
        w.call(10, 3, key=group, key_type=0)
        member_id, generation = classic_member(w, group, "consumer", subscription(topic))
        r = consumer_heartbeat(w, group, "", 0, (topic,))
        assert r.error_code == ErrorCode.group_id_not_found
        assert r.error_message == (f"Cannot upgrade classic group {group} to consumer group "
                                   "because online upgrade is disabled.")
        assert w.call(12, 3, group_id=group, generation_id=generation, member_id=member_id,
                      group_instance_id=None).error_code == ErrorCode.none
        (desc,) = w.call(15, 5, groups=(group,), include_authorized_operations=False).groups
        assert (desc.group_state, [m.member_id for m in desc.members]) == (
            "Stable", [member_id])


def test_an_unknown_migration_policy_is_refused_at_start_up(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "odradek", "broker", "--override", f"log.dirs={tmp_path}/data",
         "--override", "group.consumer.migration.policy=sideways"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert ("Invalid value sideways for configuration group.consumer.migration.policy: "
            "String must be one of (case insensitive): bidirectional, upgrade, downgrade, "
            "disabled") in lines[0]


def sync(w: WireClient, group: str, member_id: str, generation: int) -> Any:
    return w.call(14, 5, group_id=group, generation_id=generation, member_id=member_id,
                  group_instance_id=None, protocol_type="consumer", protocol_name="range",
                  assignments=())


@pytest.fixture(scope="module")
def upgrade_only_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("upgrade-only") / "data", overrides={
        **GROUP_OVERRIDES, "group.consumer.migration.policy": "upgrade"}).start()
    yield b
    b.stop()


@pytest.mark.parametrize("policy", ["bidirectional", "upgrade"])
def test_a_classic_member_on_the_wire_through_upgrade_and_downgrade(
        group_broker: BrokerProcess, upgrade_only_broker: BrokerProcess, policy: str) -> None:
    """What a classic member sees, request by request, as its group changes kind."""
    b = group_broker if policy == "bidirectional" else upgrade_only_broker
    topic, group = unique("wire-migrate"), unique("g")
    create_topic(b.bootstrap, topic, 2)
    with WireClient(b.bootstrap) as w:
        w.call(10, 3, key=group, key_type=0)
        me, generation = classic_member(w, group, "consumer", subscription(topic))

        def heartbeat(generation: int) -> ErrorCode:
            return ErrorCode(w.call(12, 3, group_id=group, generation_id=generation,
                                    member_id=me, group_instance_id=None).error_code)

        joined = consumer_heartbeat(w, group, "", 0, (topic,))
        assert joined.error_code == ErrorCode.none  # the classic group is upgraded
        assert heartbeat(generation) == ErrorCode.rebalance_in_progress
        schema = w.schema(11, 5)
        rejoined = w.call(11, 5, group_id=group, session_timeout=timedelta(seconds=30),
                          rebalance_timeout=timedelta(seconds=30), member_id=me,
                          group_instance_id=None, protocol_type="consumer",
                          protocols=(schema.JoinGroupRequestProtocol(
                              name="range", metadata=subscription(topic)),))
        assert rejoined.error_code == ErrorCode.none
        assert (rejoined.protocol_name, rejoined.leader, rejoined.members) == ("range", "", ())
        assert rejoined.generation_id > generation
        synced = sync(w, group, me, rejoined.generation_id)
        assert synced.error_code == ErrorCode.none
        mine = decode_consumer_assignment(bytes(synced.assignment))
        assert mine is not None and len(mine.get(topic, [])) <= 1  # the other is shared out
        assert heartbeat(rejoined.generation_id) == ErrorCode.none
        (g,) = w.call(69, 1, group_ids=(group,), include_authorized_operations=False).groups
        assert sorted(m.member_type for m in g.members) == [0, 1]

        left = consumer_heartbeat(w, group, joined.member_id, -1, None)
        assert left.error_code == ErrorCode.none
        (desc,) = w.call(15, 5, groups=(group,), include_authorized_operations=False).groups
        if policy == "bidirectional":
            # back to a classic group, rebalancing so that its members rejoin
            assert desc.error_code == ErrorCode.none
            assert desc.group_state == "PreparingRebalance"
            assert [m.member_id for m in desc.members] == [me]
            assert heartbeat(rejoined.generation_id) == ErrorCode.rebalance_in_progress
        else:
            # no downgrade: the consumer group serves its classic member alone
            assert desc.error_code == ErrorCode.group_id_not_found
            assert heartbeat(rejoined.generation_id) == ErrorCode.rebalance_in_progress
            again = w.call(11, 5, group_id=group, session_timeout=timedelta(seconds=30),
                           rebalance_timeout=timedelta(seconds=30), member_id=me,
                           group_instance_id=None, protocol_type="consumer",
                           protocols=(schema.JoinGroupRequestProtocol(
                               name="range", metadata=subscription(topic)),))
            synced = sync(w, group, me, again.generation_id)
            assert decode_consumer_assignment(bytes(synced.assignment)) == {topic: [0, 1]}


def test_a_static_classic_member_replacing_the_last_consumer_member_downgrades_at_once(
        group_broker: BrokerProcess) -> None:
    topic, group = unique("static-migrate"), unique("g")
    create_topic(group_broker.bootstrap, topic, 2)
    with WireClient(group_broker.bootstrap) as w:
        w.call(10, 3, key=group, key_type=0)
        other, _ = classic_member(w, group, "consumer", subscription(topic))
        joined = w.call(68, 0, group_id=group, member_id="", member_epoch=0,
                        instance_id="instance-1", rack_id=None,
                        rebalance_timeout=timedelta(seconds=30),
                        subscribed_topic_names=(topic,), server_assignor=None,
                        topic_partitions=())
        assert joined.error_code == ErrorCode.none
        # the same instance restarts on the classic protocol under a new member id
        schema = w.schema(11, 5)
        rejoined = w.call(11, 5, group_id=group, session_timeout=timedelta(seconds=30),
                          rebalance_timeout=timedelta(seconds=30), member_id="",
                          group_instance_id="instance-1", protocol_type="consumer",
                          protocols=(schema.JoinGroupRequestProtocol(
                              name="range", metadata=subscription(topic)),))
        assert rejoined.error_code == ErrorCode.none
        assert rejoined.member_id != joined.member_id
        (desc,) = w.call(15, 5, groups=(group,), include_authorized_operations=False).groups
        assert desc.error_code == ErrorCode.none and desc.group_state == "Stable"
        assert sorted(m.member_id for m in desc.members) == sorted(
            [other, rejoined.member_id])
        synced = w.call(14, 5, group_id=group, generation_id=rejoined.generation_id,
                        member_id=rejoined.member_id, group_instance_id="instance-1",
                        protocol_type="consumer", protocol_name="range", assignments=())
        assert synced.error_code == ErrorCode.none
        # it keeps what the consumer-protocol instance was given
        assert joined.assignment is not None
        given = {p for t in joined.assignment.topic_partitions for p in t.partitions}
        got = decode_consumer_assignment(bytes(synced.assignment))
        assert given and got == {topic: sorted(given)}
