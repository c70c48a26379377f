"""`__consumer_offsets`: Kafka's records, loaded back after a restart; and the errors a
misbehaving member gets."""

from __future__ import annotations

import datetime

from confluent_kafka import Consumer, TopicPartition

from odradek.coordinator.group import partition_for
from odradek.protocol.errors import ErrorCode
from odradek.protocol.group_records import (
    GroupMetadataKey,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from odradek.protocol.records import decode_batches
from tests.conftest import BrokerProcess
from tests.groups.conftest import GROUP_OVERRIDES
from tests.groups.helpers import balanced, create_topic, member, poll_until, produce, unique
from tests.wire import WireClient


def offsets_records(data_dir: object, group: str) -> list[tuple[object, bytes | None]]:
    partition = partition_for(group, 50)
    out = []
    from pathlib import Path

    for seg in sorted((Path(str(data_dir)) / f"__consumer_offsets-{partition}").glob("*.log")):
        for batch in decode_batches(seg.read_bytes()):
            out.extend((decode_key(r.key), r.value) for r in batch if r.key)
    return out


def test_offsets_and_group_survive_a_broker_restart(fresh_broker: BrokerProcess) -> None:
    fresh_broker.overrides = dict(GROUP_OVERRIDES)
    b = fresh_broker.start()
    topic, group = unique("restart"), unique("g")
    create_topic(b.bootstrap, topic, 2)
    produce(b.bootstrap, topic, 20, 2)
    c = member(b.bootstrap, group, topic, "c")
    poll_until([c], lambda: len(c.messages) >= 20, 20)
    c.consumer.commit(asynchronous=False)
    c.close()
    b.restart()
    probe = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group})
    committed = probe.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)],
                                timeout=15)
    probe.close()
    assert [tp.offset for tp in committed] == [10, 10]
    # what is on disk is Kafka's format: OffsetCommit v3 values, GroupMetadata v1
    records = offsets_records(b.data_dir, group)
    commits = [(k, decode_offset_commit_value(v)) for k, v in records
               if isinstance(k, OffsetCommitKey) and v is not None]
    assert {(k.topic, k.partition, v.offset) for k, v in commits} == {(topic, 0, 10),
                                                                      (topic, 1, 10)}
    metadata = [decode_group_metadata_value(v) for k, v in records
                if isinstance(k, GroupMetadataKey) and v is not None]
    assert metadata[-1].protocol_type == "consumer" and not metadata[-1].members
    assert any(m.members and m.protocol == "range" for m in metadata)
    produce(b.bootstrap, topic, 2, 2)
    again = member(b.bootstrap, group, topic, "again")
    poll_until([again], lambda: len(again.messages) >= 2, 20)
    assert sorted((p, o) for _, p, o in again.messages) == [(0, 10), (1, 10)]
    again.close()


def join(client: WireClient, group: str, member_id: str = "", protocol_type: str = "consumer",
         metadata: bytes = b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00") -> object:
    schema = client.schema(11, 5)
    return client.call(11, 5, group_id=group, session_timeout=datetime.timedelta(seconds=6),
                       rebalance_timeout=datetime.timedelta(seconds=6), member_id=member_id,
                       group_instance_id=None, protocol_type=protocol_type,
                       protocols=(schema.JoinGroupRequestProtocol(name="range",
                                                                  metadata=metadata),))


def test_bad_members_get_kafkas_error_codes(group_broker: BrokerProcess) -> None:
    group, topic = unique("bad"), unique("bad-t")
    create_topic(group_broker.bootstrap, topic, 1)  # commits to a missing topic: UNKNOWN_TOPIC
    with WireClient(group_broker.bootstrap) as w:
        w.call(10, 3, key=group, key_type=0)  # FindCoordinator creates __consumer_offsets
        first = join(w, group)
        assert first.error_code == ErrorCode.member_id_required
        joined = join(w, group, first.member_id)
        assert joined.error_code == ErrorCode.none and joined.generation_id == 1
        me, gen = joined.member_id, joined.generation_id
        s = w.schema(14, 3)
        synced = w.call(14, 3, group_id=group, generation_id=gen, member_id=me,
                        group_instance_id=None,
                        assignments=(s.SyncGroupRequestAssignment(member_id=me,
                                                                  assignment=b""),))
        assert synced.error_code == ErrorCode.none

        def heartbeat(member_id: str, generation: int) -> ErrorCode:
            return w.call(12, 3, group_id=group, generation_id=generation,
                          member_id=member_id, group_instance_id=None).error_code

        assert heartbeat(me, gen) == ErrorCode.none
        assert heartbeat("stranger", gen) == ErrorCode.unknown_member_id
        assert heartbeat(me, gen + 5) == ErrorCode.illegal_generation
        assert join(w, group, protocol_type="connect").error_code == \
            ErrorCode.inconsistent_group_protocol

        c = w.schema(8, 7)

        def commit(member_id: str, generation: int, metadata: str = "") -> ErrorCode:
            r = w.call(8, 7, group_id=group, generation_id_or_member_epoch=generation,
                       member_id=member_id, group_instance_id=None, topics=(
                           c.OffsetCommitRequestTopic(name=topic, partitions=(
                               c.OffsetCommitRequestPartition(
                                   partition_index=0, committed_offset=5,
                                   committed_leader_epoch=-1, committed_metadata=metadata),)),))
            return r.topics[0].partitions[0].error_code

        assert commit("stranger", gen) == ErrorCode.unknown_member_id
        assert commit(me, gen + 1) == ErrorCode.illegal_generation
        # the member's assignment was empty: the partition is someone else's
        assert commit(me, gen) == ErrorCode.illegal_generation
        assert commit(me, gen, "x" * 5000) == ErrorCode.offset_metadata_too_large
        deleted = w.call(42, 2, groups_names=(group,))
        assert deleted.results[0].error_code == ErrorCode.non_empty_group
        left = w.call(13, 0, group_id=group, member_id=me)
        assert left.error_code == ErrorCode.none
        assert heartbeat(me, gen) == ErrorCode.unknown_member_id
        assert w.call(42, 2, groups_names=(group,)).results[0].error_code == ErrorCode.none
        assert w.call(42, 2, groups_names=(group,)).results[0].error_code == \
            ErrorCode.group_id_not_found


def test_group_max_size_refuses_the_extra_member(fresh_broker: BrokerProcess) -> None:
    fresh_broker.overrides = {**GROUP_OVERRIDES, "group.max.size": "2"}
    b = fresh_broker.start()
    topic, group = unique("max"), unique("g")
    create_topic(b.bootstrap, topic, 3)
    members = [member(b.bootstrap, group, topic, f"c{i}") for i in range(2)]
    poll_until(members, balanced(members, 3), 20)
    with WireClient(b.bootstrap) as w:
        assert join(w, group).error_code == ErrorCode.group_max_size_reached
    for m in members:
        m.close()


def test_list_offsets_v0_answers_like_kafka_2(group_broker: BrokerProcess) -> None:
    from odradek.protocol import list_offsets_v0 as v0

    topic = unique("lo0")
    create_topic(group_broker.bootstrap, topic, 1)
    produce(group_broker.bootstrap, topic, 7, 1)
    with WireClient(group_broker.bootstrap) as w:
        r = w.call(2, 0, replica_id=-1, topics=(v0.ListOffsetsTopic(name=topic, partitions=(
            v0.ListOffsetsPartition(partition_index=0, timestamp=-1, max_num_offsets=1),
            v0.ListOffsetsPartition(partition_index=5, timestamp=-2, max_num_offsets=1))),))
    latest, missing = r.topics[0].partitions
    assert latest.old_style_offsets == (7,)
    assert missing.error_code == ErrorCode.unknown_topic_or_partition


def test_a_replaced_static_member_is_fenced(group_broker: BrokerProcess) -> None:
    group = unique("fence")
    with WireClient(group_broker.bootstrap) as w:
        w.call(10, 3, key=group, key_type=0)
        schema = w.schema(11, 5)

        def static_join(member_id: str = "") -> object:
            return w.call(11, 5, group_id=group, session_timeout=datetime.timedelta(seconds=6),
                          rebalance_timeout=datetime.timedelta(seconds=6),
                          member_id=member_id, group_instance_id="pod-1",
                          protocol_type="consumer", protocols=(
                              schema.JoinGroupRequestProtocol(name="range", metadata=b""),))

        old = static_join()
        assert old.error_code == ErrorCode.none
        s = w.schema(14, 3)
        assert w.call(14, 3, group_id=group, generation_id=old.generation_id,
                      member_id=old.member_id, group_instance_id="pod-1",
                      assignments=(s.SyncGroupRequestAssignment(member_id=old.member_id,
                                                                assignment=b""),)
                      ).error_code == ErrorCode.none
        new = static_join()  # the pod restarted: same instance id, no member id
        assert new.error_code == ErrorCode.none
        assert new.generation_id == old.generation_id  # no rebalance
        assert new.member_id != old.member_id
        fenced = w.call(12, 3, group_id=group, generation_id=old.generation_id,
                        member_id=old.member_id, group_instance_id="pod-1")
        assert fenced.error_code == ErrorCode.fenced_instance_id
        ok = w.call(12, 3, group_id=group, generation_id=new.generation_id,
                    member_id=new.member_id, group_instance_id="pod-1")
        assert ok.error_code == ErrorCode.none
