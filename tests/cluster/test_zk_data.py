"""The znodes' JSON: what Kafka writes, we read; what we write, Kafka reads."""

from __future__ import annotations

import json

from odradek.cluster import zk_data as zd
from odradek.cluster.metadata import BrokerInfo


def test_broker_registration_is_kafkas_version_5() -> None:
    info = BrokerInfo(1, "h1", 9092, "r1", (("PLAINTEXT", "h1", 9092), ("SSL", "h1", 9093)))
    body = json.loads(zd.encode_broker(info))
    assert body["version"] == 5
    assert body["endpoints"] == ["PLAINTEXT://h1:9092", "SSL://h1:9093"]
    assert body["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"}
    assert (body["host"], body["port"], body["rack"]) == ("h1", 9092, "r1")
    assert zd.decode_broker(1, zd.encode_broker(info)) == info


def test_reads_a_kafka_written_broker_registration() -> None:
    kafka = (b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":'
             b'["PLAINTEXT://kafka-1:9092"],"jmx_port":-1,"features":{},"host":"kafka-1",'
             b'"timestamp":"1700000000000","port":9092,"version":5}')
    assert zd.decode_broker(7, kafka) == BrokerInfo(7, "kafka-1", 9092, None,
                                                   (("PLAINTEXT", "kafka-1", 9092),))


def test_topic_assignment_round_trip_and_kafka_layout() -> None:
    a = zd.TopicAssignment("AAAAAAAAAAAAAAAAAAAAAQ", {0: (1, 2), 1: (2, 3)}, {1: (3,)}, {1: (1,)})
    body = json.loads(zd.encode_topic(a))
    assert body == {"version": 3, "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ",
                    "partitions": {"0": [1, 2], "1": [2, 3]},
                    "adding_replicas": {"1": [3]}, "removing_replicas": {"1": [1]}}
    assert zd.decode_topic(zd.encode_topic(a)) == a
    old_tool = zd.decode_topic(b'{"version":1,"partitions":{"0":[1]}}')
    assert old_tool == zd.TopicAssignment(None, {0: (1,)})


def test_partition_state_carries_the_znode_version() -> None:
    data = b'{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":5,"isr":[2,1]}'
    state = zd.decode_state(data, 11)
    assert state == zd.LeaderAndIsr(2, 5, (2, 1), 3, 11)
    assert json.loads(zd.encode_state(state)) == json.loads(data)
    moved = state.new_leader(1, (1,), 4)
    assert (moved.leader, moved.leader_epoch, moved.zk_version) == (1, 6, 11)


def test_admin_znodes() -> None:
    moves = {("t", 0): (1, 2), ("u", 3): (3,)}
    assert zd.decode_reassignment(zd.encode_reassignment(moves)) == moves
    assert json.loads(zd.encode_reassignment({("t", 0): (1, 2)})) == {
        "version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}
    assert zd.decode_partitions(zd.encode_partitions([("t", 1), ("t", 1)])) == {("t", 1)}
    assert zd.decode_producer_id_block(zd.encode_producer_id_block(1, 1000, 1999)) == \
        (1000, 1999)
    assert json.loads(zd.encode_producer_id_block(1, 0, 999))["block_end"] == "999"
    assert zd.decode_config(zd.encode_config({"retention.ms": "1"})) == {"retention.ms": "1"}
    assert zd.decode_controller(zd.encode_controller(4)) == 4
    assert zd.decode_cluster_id(zd.encode_cluster_id("abc")) == "abc"
