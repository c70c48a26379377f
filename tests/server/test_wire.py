"""Requests sent byte for byte: idempotent retries, sequence gaps, bad input, old versions."""

from __future__ import annotations

import datetime
import struct

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import NewRecord, decode_batches, encode_batch
from tests.clients.test_confluent_kafka import create_topic
from tests.conftest import BrokerProcess
from tests.wire import WireClient

PRODUCE, FETCH, METADATA, API_VERSIONS, INIT_PID = 0, 1, 3, 18, 22


def produce(client: WireClient, topic: str, records: bytes, acks: int = -1,
            version: int = 9) -> tuple[ErrorCode, int]:
    s = client.schema(PRODUCE, version)
    resp = client.call(
        PRODUCE, version, transactional_id=None, acks=acks,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(s.TopicProduceData(name=topic, partition_data=(
            s.PartitionProduceData(index=0, records=records),)),),
    )
    p = resp.responses[0].partition_responses[0]
    return ErrorCode(p.error_code), p.base_offset


def fetch_all(client: WireClient, topic: str, version: int = 12) -> list[bytes]:
    s = client.schema(FETCH, version)
    resp = client.call(
        FETCH, version, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0,
        max_bytes=50_000_000, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(s.FetchTopic(topic=topic, partitions=(s.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=50_000_000),)),),
        forgotten_topics_data=(), rack_id="",
    )
    data = resp.responses[0].partitions[0].records or b""
    return [r.value for b in decode_batches(data) for r in b.records]


def batch(seq: int, n: int = 2, pid: int = 1000, epoch: int = 0, tag: str = "") -> bytes:
    return encode_batch([NewRecord(value=f"{tag}{seq + i}".encode()) for i in range(n)],
                        producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_idempotent_retry_is_acknowledged_once(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    with WireClient(broker.bootstrap) as c:
        pid = c.call(INIT_PID, 4, transactional_id=None,
                     transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1,
                     producer_epoch=-1).producer_id
        assert pid >= 0
        first = batch(0, pid=pid)
        assert produce(c, topic_name, first) == (ErrorCode.none, 0)
        assert produce(c, topic_name, batch(2, pid=pid)) == (ErrorCode.none, 2)
        # the same two batches again, as a producer retrying after a lost response
        assert produce(c, topic_name, first) == (ErrorCode.none, 0)
        assert produce(c, topic_name, batch(2, pid=pid)) == (ErrorCode.none, 2)
        # a gap in the sequence
        code, _ = produce(c, topic_name, batch(7, pid=pid))
        assert code == ErrorCode.out_of_order_sequence_number
        # an older epoch is fenced off after a newer one wrote
        assert produce(c, topic_name, batch(0, pid=pid, epoch=1)) == (ErrorCode.none, 4)
        code, _ = produce(c, topic_name, batch(4, pid=pid, epoch=0))
        assert code == ErrorCode.invalid_producer_epoch
        assert fetch_all(c, topic_name) == [b"0", b"1", b"2", b"3", b"0", b"1"]


def test_bad_crc_is_corrupt_message_and_log_unchanged(broker: BrokerProcess,
                                                      topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    with WireClient(broker.bootstrap) as c:
        good = encode_batch([NewRecord(value=b"good")])
        assert produce(c, topic_name, good)[0] == ErrorCode.none
        bad = bytearray(encode_batch([NewRecord(value=b"bad!")]))
        bad[-1] ^= 0xFF
        assert produce(c, topic_name, bytes(bad))[0] == ErrorCode.corrupt_message
        assert produce(c, "no-such-topic-x", good)[0] == ErrorCode.unknown_topic_or_partition
        assert fetch_all(c, topic_name) == [b"good"]


def test_invalid_acks(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    with WireClient(broker.bootstrap) as c:
        code, _ = produce(c, topic_name, encode_batch([NewRecord(value=b"x")]), acks=2)
        assert code == ErrorCode.invalid_required_acks


def test_api_versions_unsupported_version_answers_v0(broker: BrokerProcess) -> None:
    with WireClient(broker.bootstrap) as c:
        # ApiVersions v99: header v1 (api key, version, correlation id, client id)
        c.send_raw(struct.pack(">ihhih", 10, API_VERSIONS, 99, 42, -1))
        frame = c.read_frame()
        corr, error = struct.unpack_from(">ih", frame, 0)
        assert corr == 42
        assert error == ErrorCode.unsupported_version
        resp = c.call(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
        keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert keys[PRODUCE][1] >= 10 and keys[FETCH][1] >= 16 and keys[METADATA][1] >= 13


@pytest.mark.parametrize("version", [0, 1, 4, 9, 12, 13])
def test_metadata_versions(broker: BrokerProcess, topic_name: str, version: int) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    with WireClient(broker.bootstrap) as c:
        s = c.schema(METADATA, version)
        topic = (s.MetadataRequestTopic(name=topic_name, topic_id=None) if version >= 10
                 else s.MetadataRequestTopic(name=topic_name))
        kwargs: dict[str, object] = {"topics": (topic,)}
        if version >= 4:
            kwargs["allow_auto_topic_creation"] = False
        if version >= 8:
            kwargs["include_topic_authorized_operations"] = False
        if 8 <= version <= 10:
            kwargs["include_cluster_authorized_operations"] = False
        resp = c.call(METADATA, version, **kwargs)
        assert resp.topics[0].name == topic_name
        assert len(resp.topics[0].partitions) == 2
        assert resp.brokers[0].port == broker.port
