"""`__share_group_state` is pruned as Kafka's share coordinator prunes it: the records
below the oldest latest-snapshot of a state partition's share-partitions are deleted
(its log start advances, whole segments go), and a restart still restores every
acknowledgement from what is left.

Two broker starts make this ~13 s: it is in the slow set; the default run has the same
rule on real logs with a reload in test_share_state.py
(test_pruning_keeps_each_share_partitions_latest_snapshot_and_what_follows)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Consumer, TopicPartition

from tests.conftest import BrokerProcess
from tests.share.conftest import STATE_PARTITIONS
from tests.share.helpers import (
    earliest_group,
    new_topic,
    poll_until,
    produce,
    share_consumer,
    wait_for,
)

STATE_TOPIC = "__share_group_state"
RECORDS = 12
ACCEPTED = 8  # offsets 0-7 accepted, 8 rejected, 9-11 released


def state_log_starts(bootstrap: str) -> list[tuple[int, int]]:
    """(log start, log end) of each __share_group_state partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "pruning-probe"})
    try:
        partitions = int(STATE_PARTITIONS["share.coordinator.state.topic.num.partitions"])
        return [c.get_watermark_offsets(TopicPartition(STATE_TOPIC, p), timeout=30)
                for p in range(partitions)]
    finally:
        c.close()


@pytest.mark.slow
def test_pruning_moves_the_state_log_start_and_a_restart_keeps_every_acknowledgement(
        tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", overrides={
        "group.share.heartbeat.interval.ms": "500", **STATE_PARTITIONS,
        # a snapshot every other write, pruned at once, segments of a few records
        "share.coordinator.snapshot.update.records.per.snapshot": "1",
        "share.coordinator.state.topic.prune.interval.ms": "100",
        "share.coordinator.state.topic.segment.bytes": "600"})
    try:
        broker.start()
        bootstrap = broker.bootstrap
        topic = new_topic(bootstrap)
        group = earliest_group(bootstrap)
        produce(bootstrap, topic, [f"r{i}" for i in range(RECORDS)])
        with share_consumer(bootstrap, group, topic) as c:
            def one_write_each(batch: list[Any]) -> None:
                for m in batch:
                    kind = (AcknowledgeType.ACCEPT if m.offset() < ACCEPTED
                            else AcknowledgeType.REJECT if m.offset() == ACCEPTED
                            else AcknowledgeType.RELEASE)
                    c.acknowledge(m, kind)
                    assert all(e is None for e in c.commit_sync(30).values())

            poll_until(c, lambda seen: {m.offset() for m in seen} >= set(range(RECORDS)),
                       on_batch=one_write_each)

        def pruned() -> list[tuple[int, int]] | None:
            bounds = [(low, high) for low, high in state_log_starts(bootstrap) if high > 0]
            return bounds if bounds and all(low > 0 for low, _ in bounds) else None

        before = wait_for(pruned, 30, f"not pruned: {state_log_starts(bootstrap)}")
        # the state of RECORDS acknowledgements in a few records: most of them went
        assert all(high - low < RECORDS for low, high in before), before

        broker.kill()
        broker.start()
        assert all(low > 0 for low, high in state_log_starts(bootstrap) if high > 0)
        with share_consumer(bootstrap, group, topic) as c:
            def accept(batch: list[Any]) -> None:
                for m in batch:
                    c.acknowledge(m)
                assert all(e is None for e in c.commit_sync(30).values())

            again = poll_until(c, lambda seen: {m.offset() for m in seen} >= {9, 10, 11},
                               on_batch=accept)
            assert sorted({m.offset() for m in again}) == [9, 10, 11], \
                "an accepted or rejected record came back after pruning and a restart"
            assert all(m.delivery_count() >= 2 for m in again)
    finally:
        broker.kill()
