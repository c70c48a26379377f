"""Share requests a client gets wrong, on the wire: Kafka's error codes, and nothing
acknowledged twice or lost."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest

from tests.conftest import BrokerProcess
from tests.share.helpers import new_topic, wait_for
from tests.wire import WireClient

INVALID_REQUEST = 42
INVALID_RECORD_STATE = 121
SHARE_SESSION_NOT_FOUND = 122
INVALID_SHARE_SESSION_EPOCH = 123
GROUP_ID_NOT_FOUND = 69
FENCED_MEMBER_EPOCH = 110
UNKNOWN_MEMBER_ID = 25
RETRIABLE = (14, 15, 16)  # load in progress, coordinator not available, not coordinator
ACCEPT, RELEASE, REJECT = 1, 2, 3


class Share:
    """One member's view: heartbeats, fetches and acknowledgements in its session."""

    def __init__(self, c: WireClient, group: str, member: str) -> None:
        self.c, self.group, self.member = c, group, member
        self.epoch = 0  # share session epoch
        self.topic_id: uuid.UUID | None = None

    def join(self, topic: str) -> Any:
        def once() -> Any:
            r = self.c.call(76, 1, group_id=self.group, member_id=self.member,
                            member_epoch=0, rack_id=None, subscribed_topic_names=(topic,))
            return None if r.error_code in RETRIABLE else r
        r = wait_for(once, 30, "the share coordinator did not answer")
        assert r.error_code == 0, r
        self.topic_id = r.assignment.topic_partitions[0].topic_id
        return r

    def _acks(self, schema: Any, cls: str, ranges: list[tuple[int, int, tuple[int, ...]]]
              ) -> tuple[Any, ...]:
        return tuple(getattr(schema, cls)(first_offset=f, last_offset=last,
                                          acknowledge_types=types)
                     for f, last, types in ranges)

    def fetch(self, epoch: int | None = None, wait_ms: int = 0,
              acks: list[tuple[int, int, tuple[int, ...]]] | None = None,
              fetching: bool = True) -> Any:
        s = self.c.schema(78, 1)
        part = s.FetchPartition(partition_index=0, acknowledgement_batches=self._acks(
            s, "AcknowledgementBatch", acks or []))
        r = self.c.call(
            78, 1, group_id=self.group, member_id=self.member,
            share_session_epoch=self.epoch if epoch is None else epoch,
            max_wait=datetime.timedelta(milliseconds=wait_ms), min_bytes=1,
            max_bytes=1 << 20, max_records=500, batch_size=500,
            topics=(s.FetchTopic(topic_id=self.topic_id, partitions=(part,)),)
            if fetching or acks else (),
            forgotten_topics_data=())
        if r.error_code == 0 and epoch is None:
            self.epoch += 1
        return r

    def ack(self, ranges: list[tuple[int, int, tuple[int, ...]]],
            epoch: int | None = None) -> Any:
        s = self.c.schema(79, 1)
        r = self.c.call(
            79, 1, group_id=self.group, member_id=self.member,
            share_session_epoch=self.epoch if epoch is None else epoch,
            topics=(s.AcknowledgeTopic(topic_id=self.topic_id, partitions=(
                s.AcknowledgePartition(partition_index=0, acknowledgement_batches=self._acks(
                    s, "AcknowledgementBatch", ranges)),)),))
        if r.error_code == 0 and epoch is None:
            self.epoch += 1
        return r


def partition_error(r: Any, field: str = "error_code") -> int:
    return int(getattr(r.responses[0].partitions[0], field))


def acquired(r: Any) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in r.responses for p in t.partitions for a in p.acquired_records]


def test_share_session_epochs_as_kafka_checks_them(holder: Any) -> None:
    c, m1, _ = holder
    assert m1.fetch(epoch=m1.epoch + 5).error_code == INVALID_SHARE_SESSION_EPOCH
    ghost = Share(c, m1.group, "ghost")
    ghost.topic_id = m1.topic_id
    assert ghost.fetch(epoch=1).error_code == SHARE_SESSION_NOT_FOUND
    assert ghost.ack([(0, 0, (ACCEPT,))], epoch=3).error_code == SHARE_SESSION_NOT_FOUND
    # a fetch opening a session cannot acknowledge; an acknowledge cannot open one
    assert ghost.fetch(epoch=0, acks=[(0, 0, (ACCEPT,))]).error_code == INVALID_REQUEST
    assert m1.ack([(0, 0, (ACCEPT,))], epoch=0).error_code == INVALID_SHARE_SESSION_EPOCH
    # none of that moved m1's session on, nor acknowledged anything
    r = m1.ack([(0, 2, (ACCEPT,))])
    assert (r.error_code, partition_error(r)) == (0, 0)


def test_acknowledging_records_the_member_does_not_hold(holder: Any) -> None:
    c, m1, _ = holder
    other = Share(c, m1.group, "m2")
    other.topic_id = m1.topic_id
    assert other.fetch().error_code == 0  # its own session, nothing to acquire
    assert partition_error(other.ack([(0, 0, (ACCEPT,))])) == INVALID_RECORD_STATE
    # out of range: never fetched by anyone
    assert partition_error(m1.ack([(50, 60, (ACCEPT,))])) == INVALID_RECORD_STATE
    # m1 still holds all three: accept them once, and only once
    assert partition_error(m1.ack([(0, 2, (ACCEPT,))])) == 0
    assert partition_error(m1.ack([(1, 1, (ACCEPT,))])) == INVALID_RECORD_STATE
    assert partition_error(m1.ack([(2, 2, (RELEASE,))])) == INVALID_RECORD_STATE


@pytest.mark.parametrize("ranges", [
    [(0, 0, (9,))],  # unknown acknowledge type
    [(0, 1, (ACCEPT,)), (1, 2, (ACCEPT,))],  # overlapping ranges
    [(1, 2, (ACCEPT,)), (0, 0, (ACCEPT,))],  # out of order
    [(2, 1, (ACCEPT,))],  # last before first
    [(0, 2, (ACCEPT, REJECT))],  # two types for three records
], ids=["unknown-type", "overlapping", "out-of-order", "reversed", "type-count"])
def test_malformed_acknowledgements_are_invalid_requests_and_change_nothing(
        holder: Any, ranges: list[tuple[int, int, tuple[int, ...]]]) -> None:
    _, m1, _ = holder
    assert partition_error(m1.ack(ranges)) == INVALID_REQUEST
    r = m1.fetch(acks=ranges)  # piggy-backed on a fetch: the same answer
    assert (r.error_code, partition_error(r, "acknowledge_error_code")) == (0, INVALID_REQUEST)
    assert partition_error(m1.ack([(0, 2, (ACCEPT, REJECT, ACCEPT))])) == 0


def test_per_record_types_and_a_fetch_at_the_final_epoch_releases_the_rest(
        holder: Any) -> None:
    c, m1, _ = holder
    # reject 0, release 1, keep 2: then close the session, which gives 2 back too
    assert partition_error(m1.ack([(0, 1, (REJECT, RELEASE))])) == 0
    assert m1.fetch(epoch=-1).error_code == INVALID_REQUEST  # closing, it cannot fetch
    assert m1.fetch(epoch=-1, fetching=False).error_code == 0
    assert m1.fetch(epoch=5).error_code == SHARE_SESSION_NOT_FOUND
    again = Share(c, m1.group, "m3")
    again.topic_id = m1.topic_id
    opened = again.fetch()  # opening a session fetches too
    assert opened.error_code == 0
    got = acquired(opened)
    assert got == [(1, 2, 2)], "the rejected record came back or the released did not"


def test_heartbeat_epochs(holder: Any) -> None:
    c, m1, topic = holder
    stale = c.call(76, 1, group_id=m1.group, member_id="m1", member_epoch=999,
                   rack_id=None, subscribed_topic_names=None)
    assert stale.error_code == FENCED_MEMBER_EPOCH
    unknown = c.call(76, 1, group_id=m1.group, member_id="nobody", member_epoch=3,
                     rack_id=None, subscribed_topic_names=None)
    assert unknown.error_code == UNKNOWN_MEMBER_ID
    missing = c.call(76, 1, group_id="no-such-share-group", member_id="x", member_epoch=3,
                     rack_id=None, subscribed_topic_names=None)
    assert missing.error_code in (GROUP_ID_NOT_FOUND, *RETRIABLE)
    empty = c.call(76, 1, group_id=m1.group, member_id="", member_epoch=0, rack_id=None,
                   subscribed_topic_names=(topic,))
    assert empty.error_code == INVALID_REQUEST
    # the group is listed as a share group, and described with its member
    listed = c.call(16, 5, states_filter=(), types_filter=("share",))
    assert m1.group in {g.group_id for g in listed.groups}
    assert all(g.group_type == "share" for g in listed.groups)
    d = c.call(77, 1, group_ids=(m1.group,), include_authorized_operations=False).groups[0]
    assert (d.error_code, d.group_state, [m.member_id for m in d.members]) == \
        (0, "Stable", ["m1"])
    left = c.call(76, 1, group_id=m1.group, member_id="m1", member_epoch=-1, rack_id=None,
                  subscribed_topic_names=None)
    assert (left.error_code, left.member_epoch) == (0, -1)
    d = c.call(77, 1, group_ids=(m1.group,), include_authorized_operations=False).groups[0]
    assert (d.group_state, d.members) == ("Empty", ())


def test_a_consumer_groups_id_is_not_a_share_groups(share_broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, TopicPartition

    bootstrap = share_broker.bootstrap
    topic = new_topic(bootstrap)
    group = f"classic-{uuid.uuid4().hex[:8]}"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        c.close()
    with WireClient(bootstrap) as w:
        r = w.call(76, 1, group_id=group, member_id="m", member_epoch=0, rack_id=None,
                   subscribed_topic_names=(topic,))
    assert r.error_code == GROUP_ID_NOT_FOUND
    assert "not a share group" in (r.error_message or "")
