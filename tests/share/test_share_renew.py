"""RENEW acknowledgements (ack type 4, KIP-1222, ShareFetch/ShareAcknowledge v2 in Kafka
4.2): a member keeps the records it holds past the acquisition lock duration; v1 does
not know the type; a renew-only ShareFetch must not ask for records."""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

from tests.conftest import BrokerProcess
from tests.share.conftest import SHORT_LOCK_MS
from tests.share.helpers import new_topic, produce
from tests.share.test_share_wire import ACCEPT, Share, acquired, partition_error
from tests.wire import WireClient

INVALID_REQUEST = 42
RENEW = 4


def renew(m: Share, first: int, last: int) -> Any:
    s = m.c.schema(79, 2)
    r = m.c.call(79, 2, group_id=m.group, member_id=m.member,
                 share_session_epoch=m.epoch, is_renew_ack=True,
                 topics=(s.AcknowledgeTopic(topic_id=m.topic_id, partitions=(
                     s.AcknowledgePartition(partition_index=0, acknowledgement_batches=(
                         s.AcknowledgementBatch(first_offset=first, last_offset=last,
                                                acknowledge_types=(RENEW,)),)),)),))
    if r.error_code == 0:
        m.epoch += 1
    return r


def test_renew_keeps_records_past_the_lock_and_v1_refuses_it(
        short_lock_broker: BrokerProcess) -> None:
    b = short_lock_broker.bootstrap
    topic = new_topic(b)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with WireClient(b) as c1, WireClient(b) as c2:
        c1.call(10, 4, key_type=0, coordinator_keys=(group,))
        m1, m2 = Share(c1, group, "m1"), Share(c2, group, "m2")
        m1.join(topic)
        m2.join(topic)
        assert m1.fetch().error_code == 0 and m2.fetch().error_code == 0
        produce(b, topic, ["a", "b", "c"])
        got: list[tuple[int, int, int]] = []
        while sum(last - first + 1 for first, last, _ in got) < 3:
            r = m1.fetch(wait_ms=5000)
            assert r.error_code == 0, r
            got += acquired(r)

        # v1 has no RENEW: an unknown type, nothing changes
        assert partition_error(m1.ack([(0, 2, (RENEW,))])) == INVALID_REQUEST
        # renewing, m1 holds them for twice the lock: m2, fetching meanwhile, gets none
        end = time.monotonic() + 2 * SHORT_LOCK_MS / 1000
        while time.monotonic() < end:
            r = renew(m1, 0, 2)
            assert (r.error_code, partition_error(r)) == (0, 0), r
            # m2's fetch waits up to 300 ms: the pace of m1's renewals
            assert acquired(m2.fetch(wait_ms=300)) == []
        # still m1's, delivered once: it accepts them, and nobody gets them again
        assert partition_error(m1.ack([(0, 2, (ACCEPT,))])) == 0
        assert acquired(m2.fetch(wait_ms=2 * SHORT_LOCK_MS)) == []


def test_a_renew_fetch_acknowledges_and_fetches_nothing(
        short_lock_broker: BrokerProcess) -> None:
    b = short_lock_broker.bootstrap
    topic = new_topic(b)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with WireClient(b) as c:
        m1 = Share(c, group, "m1")
        m1.join(topic)
        assert m1.fetch().error_code == 0
        produce(b, topic, ["a", "b", "c", "d"])
        got: list[tuple[int, int, int]] = []
        while not got:
            r = m1.fetch(wait_ms=5000, fetching=True)
            got += acquired(r)
        first, last, _ = got[0]
        s = c.schema(78, 2)

        def fetch(renewing: bool, records: int) -> Any:
            part = s.FetchPartition(partition_index=0, acknowledgement_batches=(
                s.AcknowledgementBatch(first_offset=first, last_offset=last,
                                       acknowledge_types=(RENEW,)),))
            return c.call(78, 2, group_id=group, member_id="m1",
                          share_session_epoch=m1.epoch,
                          max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=0,
                          max_records=records, batch_size=0, share_acquire_mode=0,
                          is_renew_ack=renewing,
                          topics=(s.FetchTopic(topic_id=m1.topic_id, partitions=(part,)),),
                          forgotten_topics_data=())

        assert fetch(True, 10).error_code == INVALID_REQUEST  # it asks for records
        r = fetch(True, 0)
        assert r.error_code == 0, r
        m1.epoch += 1
        assert partition_error(r, "acknowledge_error_code") == 0
        assert acquired(r) == []
        assert partition_error(m1.ack([(first, last, (ACCEPT,))])) == 0
