"""Bad input to the partition admin APIs and OffsetForLeaderEpoch, on a real broker:
each partition gets Kafka's error code, nothing changes, and the broker keeps serving."""

from __future__ import annotations

import datetime
import time

from odradek.protocol.errors import ErrorCode
from tests.clients.test_confluent_kafka import create_topic
from tests.conftest import BrokerProcess
from tests.wire import WireClient

TIMEOUT = datetime.timedelta(seconds=5)


def test_reassignments_elections_and_epochs_refuse_what_does_not_exist(
        broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=1)
    with WireClient(broker.bootstrap) as w:
        m = w.schema(45, 0)
        r = w.call(45, 0, timeout=TIMEOUT, topics=(
            m.ReassignableTopic(name=topic_name, partitions=(
                m.ReassignablePartition(partition_index=-1, replicas=(1,)),
                m.ReassignablePartition(partition_index=7, replicas=(1,)),
                m.ReassignablePartition(partition_index=0, replicas=()),
                m.ReassignablePartition(partition_index=0, replicas=(999,)),
                m.ReassignablePartition(partition_index=0, replicas=None))),
            m.ReassignableTopic(name="no-such-topic", partitions=(
                m.ReassignablePartition(partition_index=0, replicas=(1,)),))))
        got = [ErrorCode(p.error_code) for t in r.responses for p in t.partitions]
        assert got[:2] == [ErrorCode.unknown_topic_or_partition] * 2
        assert got[2] == got[3] == ErrorCode.invalid_replica_assignment
        messages = [p.error_message for t in r.responses for p in t.partitions]
        assert messages[2] == "The manual partition assignment includes an empty replica list."
        assert messages[3] == ("The manual partition assignment includes broker 999, but no "
                               "such broker is registered.")
        assert got[4] == ErrorCode.no_reassignment_in_progress
        assert got[5] == ErrorCode.unknown_topic_or_partition

        m = w.schema(46, 0)
        r = w.call(46, 0, timeout=TIMEOUT, topics=(m.ListPartitionReassignmentsTopics(
            name="no-such-topic", partition_indexes=(0, -1)),))
        assert ErrorCode(r.error_code) == ErrorCode.none and r.topics == ()

        m = w.schema(43, 2)
        r = w.call(43, 2, election_type=0, timeout=TIMEOUT, topic_partitions=(
            m.TopicPartitions(topic=topic_name, partitions=(0, -1, 9)),
            m.TopicPartitions(topic="no-such-topic", partitions=(0,))))
        got = {(t.topic, p.partition_id): ErrorCode(p.error_code)
               for t in r.replica_election_results for p in t.partition_result}
        assert got == {(topic_name, 0): ErrorCode.election_not_needed,
                       (topic_name, -1): ErrorCode.unknown_topic_or_partition,
                       (topic_name, 9): ErrorCode.unknown_topic_or_partition,
                       ("no-such-topic", 0): ErrorCode.unknown_topic_or_partition}

        m = w.schema(23, 4)
        r = w.call(23, 4, replica_id=-1, topics=(
            m.OffsetForLeaderTopic(topic=topic_name, partitions=(
                m.OffsetForLeaderPartition(partition=-1, current_leader_epoch=-1,
                                           leader_epoch=0),
                m.OffsetForLeaderPartition(partition=0, current_leader_epoch=99,
                                           leader_epoch=0))),
            m.OffsetForLeaderTopic(topic="no-such-topic", partitions=(
                m.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1,
                                           leader_epoch=0),))))
        got = {(t.topic, p.partition): ErrorCode(p.error_code)
               for t in r.topics for p in t.partitions}
        assert got == {(topic_name, -1): ErrorCode.unknown_topic_or_partition,
                       (topic_name, 0): ErrorCode.unknown_leader_epoch,
                       ("no-such-topic", 0): ErrorCode.unknown_topic_or_partition}

        # nothing moved, and the broker still answers
        md = w.call(3, 12, topics=None, allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False)
        (t,) = [t for t in md.topics if t.name == topic_name]
        assert [tuple(p.replica_nodes) for p in t.partitions] == [(1,)]


def test_invalid_replica_assignments_get_kafkas_error_and_create_nothing(
        broker: BrokerProcess, topic_name: str) -> None:
    """CreateTopics and CreatePartitions: a duplicate replica, an empty list, a broker
    that is not registered, unequal replica counts — INVALID_REPLICA_ASSIGNMENT (39) with
    Kafka's message, and no topic or partition appears."""
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    cases = {
        "dup": ([[1, 1]], "duplicate replicas [1, 1]"),
        "unknown": ([[5]], "includes broker 5, but no such broker is registered"),
        "unequal": ([[1], [1, 5]], "with 2 replica(s), but this is not consistent"),
    }
    for suffix, (assignment, message) in cases.items():
        name = f"{topic_name}-{suffix}"
        fut = admin.create_topics([NewTopic(name, num_partitions=len(assignment),
                                            replication_factor=-1,
                                            replica_assignment=assignment)])[name]
        try:
            fut.result(15)
            raise AssertionError(f"{suffix}: created")
        except Exception as e:
            err = e.args[0]
            assert err.code() == 39, (suffix, err)
            assert message in err.str(), (suffix, err.str())
    listed = admin.list_topics(timeout=10).topics
    assert not any(n.startswith(topic_name + "-") for n in listed)
    create_topic(broker.bootstrap, topic_name, partitions=1)
    fut = admin.create_partitions([NewPartitions(topic_name, 2, [[7]])])[topic_name]
    try:
        fut.result(15)
        raise AssertionError("partitions added on broker 7")
    except Exception as e:
        assert e.args[0].code() == 39 and "broker 7" in e.args[0].str()
    assert len(admin.list_topics(timeout=10).topics[topic_name].partitions) == 1


def test_offset_commit_for_a_partition_that_does_not_exist(
        broker: BrokerProcess, topic_name: str) -> None:
    """UNKNOWN_TOPIC_OR_PARTITION for the missing ones, as Kafka's metadata check; the
    partition that exists is committed."""
    create_topic(broker.bootstrap, topic_name, partitions=1)
    with WireClient(broker.bootstrap) as w:
        w.call(10, 4, key_type=0, coordinator_keys=("g-unknown",))  # creates offsets topic
        s = w.schema(8, 8)

        def part(index: int) -> object:
            return s.OffsetCommitRequestPartition(
                partition_index=index, committed_offset=3, committed_leader_epoch=-1,
                committed_metadata="")

        deadline = time.monotonic() + 20
        while True:
            r = w.call(8, 8, group_id="g-unknown", generation_id_or_member_epoch=-1,
                       member_id="", group_instance_id=None, topics=(
                           s.OffsetCommitRequestTopic(name=topic_name,
                                                      partitions=(part(0), part(5))),
                           s.OffsetCommitRequestTopic(name="no-such-topic",
                                                      partitions=(part(0),))))
            got = {(t.name, p.partition_index): ErrorCode(p.error_code)
                   for t in r.topics for p in t.partitions}
            if got[(topic_name, 0)] != ErrorCode.coordinator_load_in_progress or \
                    time.monotonic() > deadline:
                break
        assert got == {(topic_name, 0): ErrorCode.none,
                       (topic_name, 5): ErrorCode.unknown_topic_or_partition,
                       ("no-such-topic", 0): ErrorCode.unknown_topic_or_partition}
