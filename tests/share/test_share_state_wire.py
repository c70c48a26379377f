"""The share coordinator's APIs (83-87) on the wire, as another broker (a share-partition
leader) calls them: Kafka's schemas, the state a share group's acknowledgements left,
and the epochs that fence."""

from __future__ import annotations

import uuid
from typing import Any

from tests.share.helpers import wait_for
from tests.share.test_share_wire import ACCEPT, RELEASE
from tests.wire import WireClient

INVALID_REQUEST = 42
UNKNOWN_TOPIC_OR_PARTITION = 3
FENCED_LEADER_EPOCH = 74
FENCED_STATE_EPOCH = 124


def read(c: WireClient, group: str, topic_id: uuid.UUID, partition: int = 0,
         leader_epoch: int = 0) -> Any:
    s = c.schema(84, 0)
    r = c.call(84, 0, group_id=group, topics=(s.ReadStateData(
        topic_id=topic_id, partitions=(s.PartitionData(partition=partition,
                                                       leader_epoch=leader_epoch),)),))
    return r.results[0].partitions[0]


def batches(p: Any) -> list[tuple[int, int, int, int]]:
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in p.state_batches]


def test_a_groups_acknowledgements_are_the_share_coordinators_state(holder: Any) -> None:
    c, m1, _ = holder
    # accept 0, release 1, keep 2: the state is start 1, 1 available (delivered once),
    # 2 available too (an acquired record is kept as available)
    r = m1.ack([(0, 0, (ACCEPT,)), (1, 1, (RELEASE,))])
    assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0
    p = read(c, m1.group, m1.topic_id)
    assert (p.error_code, p.start_offset, batches(p)) == (0, 1, [(1, 2, 0, 1)])
    s = c.schema(87, 1)
    summary = c.call(87, 1, group_id=m1.group, topics=(s.ReadStateSummaryData(
        topic_id=m1.topic_id, partitions=(s.PartitionData(partition=0, leader_epoch=0),)),))
    assert summary.results[0].partitions[0].start_offset == 1


def test_write_initialize_delete_and_the_fences(holder: Any) -> None:
    c, m1, _ = holder
    group = f"other-{uuid.uuid4().hex[:6]}"
    topic_id = m1.topic_id
    assert read(c, group, topic_id).start_offset == -1  # nothing yet
    s = c.schema(83, 0)
    r = c.call(83, 0, group_id=group, topics=(s.InitializeStateData(
        topic_id=topic_id, partitions=(s.PartitionData(partition=0, state_epoch=1,
                                                       start_offset=5),)),))
    assert r.results[0].partitions[0].error_code == 0
    p = read(c, group, topic_id, leader_epoch=3)
    assert (p.state_epoch, p.start_offset, batches(p)) == (1, 5, [])

    def write(state_epoch: int, leader_epoch: int, start: int,
              states: list[tuple[int, int, int, int]]) -> int:
        w = c.schema(85, 0)
        r = c.call(85, 0, group_id=group, topics=(w.WriteStateData(
            topic_id=topic_id, partitions=(w.PartitionData(
                partition=0, state_epoch=state_epoch, leader_epoch=leader_epoch,
                start_offset=start, state_batches=tuple(
                    w.StateBatch(first_offset=a, last_offset=b, delivery_state=st,
                                 delivery_count=n) for a, b, st, n in states)),)),))
        return int(r.results[0].partitions[0].error_code)

    assert write(1, 3, -1, [(5, 9, 0, 1), (6, 7, 2, 1)]) == 0
    assert batches(read(c, group, topic_id, leader_epoch=3)) == \
        [(5, 5, 0, 1), (6, 7, 2, 1), (8, 9, 0, 1)]
    assert write(1, 2, -1, []) == FENCED_LEADER_EPOCH  # a leader older than the reader
    assert write(0, 3, -1, []) == FENCED_STATE_EPOCH
    assert read(c, group, topic_id, leader_epoch=2).error_code == FENCED_LEADER_EPOCH
    assert read(c, group, topic_id, partition=-1).error_code == INVALID_REQUEST
    # as Kafka: state only for topic partitions the metadata has
    assert read(c, group, topic_id, partition=99).error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert read(c, group, uuid.uuid4()).error_code == UNKNOWN_TOPIC_OR_PARTITION
    d = c.schema(86, 0)
    r = c.call(86, 0, group_id=group, topics=(d.DeleteStateData(
        topic_id=topic_id, partitions=(d.PartitionData(partition=0),)),))
    assert r.results[0].partitions[0].error_code == 0
    assert wait_for(lambda: read(c, group, topic_id, leader_epoch=3).start_offset == -1
                    or None, 10)
