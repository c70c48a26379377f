"""Truncation by leader epoch (KIP-101/279) on real logs, and OffsetForLeaderEpoch (23)
against a real broker process."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from odradek.cluster.metadata import PartitionInfo
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import NewRecord, encode_batch
from odradek.replication.fetcher import fetcher_index, truncation_target
from odradek.replication.partition import Partition
from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig
from tests.conftest import BrokerProcess
from tests.wire import WireClient

OFFSET_FOR_LEADER_EPOCH = 23


def replica(tmp_path: Path, epochs: list[tuple[int, int]], name: str = "t-0") -> Partition:
    """A follower's partition whose log holds `n` one-record batches per (epoch, n)."""
    lg = Log.open(tmp_path / name, LogConfig())
    for epoch, n in epochs:
        for _ in range(n):
            lg.append_as_leader(bytearray(encode_batch([NewRecord(value=b"v")])), epoch)
    p = Partition("t", 0, uuid.uuid4(), lg, node_id=2)
    p.become_follower(PartitionInfo(0, 1, 9, (1, 2), (1, 2)))
    return p


def test_same_epoch_truncates_to_the_smaller_end(tmp_path: Path) -> None:
    p = replica(tmp_path, [(0, 3), (1, 4)])  # epoch 1 covers offsets 3..6
    assert truncation_target(p, 1, 5) == (5, True)
    assert truncation_target(p, 1, 9) == (7, True)  # the leader has more: nothing to cut


def test_unknown_leader_epoch_truncates_to_our_end_of_the_epoch_below_and_asks_again(
        tmp_path: Path) -> None:
    # we have epochs 0 and 2; the leader's largest epoch <= 2 is 1, which we never saw
    p = replica(tmp_path, [(0, 3), (2, 4)])
    target, done = truncation_target(p, 1, 5)
    assert (target, done) == (3, False)  # where our epoch 0 ended
    p.log.truncate_to(target)
    assert p.log.leader_epochs.latest_epoch == 0
    assert truncation_target(p, 0, 3) == (3, True)


def test_leader_without_the_epoch_keeps_only_the_high_watermark(tmp_path: Path) -> None:
    p = replica(tmp_path, [(3, 5)])
    p.log.high_watermark = 2
    assert truncation_target(p, -1, -1) == (2, True)


def test_follower_truncation_drops_the_epoch_cache_tail_and_producer_state(
        tmp_path: Path) -> None:
    p = replica(tmp_path, [(0, 3), (1, 4)])
    p.log.truncate_to(3)
    assert p.log.log_end_offset == 3
    assert [tuple(e) for e in p.log.leader_epochs.entries] == [(0, 0)]


def test_become_leader_starts_its_epoch_at_the_log_end(tmp_path: Path) -> None:
    p = replica(tmp_path, [(0, 2)])
    p.become_leader(PartitionInfo(0, 2, 4, (1, 2), (2,)))
    assert p.is_leader and p.solo
    assert p.log.leader_epochs.latest_entry == (4, 2)
    assert p.log.leader_epochs.end_offset_for(0, p.log.log_end_offset) == (0, 2)


def test_fetcher_index_is_stable_and_spreads_partitions() -> None:
    assert fetcher_index("orders", 3, 4) == fetcher_index("orders", 3, 4)
    assert {fetcher_index("orders", i, 4) for i in range(16)} == {0, 1, 2, 3}
    assert fetcher_index("orders", 7, 1) == 0


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch_on_a_single_broker(broker: BrokerProcess, version: int,
                                                    topic_name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(10)
    with WireClient(broker.bootstrap) as c:
        produce = c.schema(0, 9)
        for _ in range(3):
            c.call(0, 9, transactional_id=None, acks=-1, timeout=_ms(5000), topic_data=(
                produce.TopicProduceData(name=topic_name, partition_data=(
                    produce.PartitionProduceData(
                        index=0, records=encode_batch([NewRecord(value=b"x")])),)),))
        m = c.schema(OFFSET_FOR_LEADER_EPOCH, version)
        fields = {"leader_epoch": 0, "current_leader_epoch": -1}
        extra = {"replica_id": -1} if version >= 3 else {}
        parts = (m.OffsetForLeaderPartition(partition=0, **fields),
                 m.OffsetForLeaderPartition(partition=7, **fields))
        r = c.call(OFFSET_FOR_LEADER_EPOCH, version, topics=(
            m.OffsetForLeaderTopic(topic=topic_name, partitions=parts),), **extra)
        ok, missing = r.topics[0].partitions
        assert (ok.error_code, ok.leader_epoch, ok.end_offset) == (ErrorCode.none, 0, 3)
        assert missing.error_code == ErrorCode.unknown_topic_or_partition
        assert (missing.leader_epoch, missing.end_offset) == (-1, -1)
        newer = m.OffsetForLeaderPartition(partition=0, leader_epoch=0, current_leader_epoch=5)
        r = c.call(OFFSET_FOR_LEADER_EPOCH, version, topics=(
            m.OffsetForLeaderTopic(topic=topic_name, partitions=(newer,)),), **extra)
        assert r.topics[0].partitions[0].error_code == ErrorCode.unknown_leader_epoch


def _ms(value: int) -> object:
    import datetime

    return datetime.timedelta(milliseconds=value)
