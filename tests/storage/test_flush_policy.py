"""log.flush.interval.messages / .ms as Kafka honours them, seen from the recovery
point the broker checkpoints (what a restart after a power loss trusts as on disk)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from odradek.storage.checkpoints import RECOVERY_POINT_CHECKPOINT, read_offsets
from tests.clients.test_confluent_kafka import create_topic
from tests.conftest import BrokerProcess

RECORDS = 30


def _produce_one_by_one(bootstrap: str, topic: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    for i in range(RECORDS):
        p.produce(topic, b"r%d" % i)
        assert p.flush(15) == 0


def _checkpointed_after(broker: BrokerProcess, topic: str, since: float) -> int:
    """The recovery point of topic-0 in a checkpoint written after `since`."""
    path = broker.data_dir / RECOVERY_POINT_CHECKPOINT
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if path.stat().st_mtime > since:
                offsets = read_offsets(path)
                if (topic, 0) in offsets:
                    return offsets[(topic, 0)]
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"no checkpoint of {topic}-0 written after the produce")


@pytest.mark.parametrize(("policy", "flushed"), [
    ({"log.flush.interval.messages": "1"}, RECORDS),  # each acknowledgement after fsync
    pytest.param({"log.flush.interval.messages": "10"}, RECORDS,  # the 30th flushes
                 marks=pytest.mark.slow),
    pytest.param({"log.flush.interval.ms": "100"}, RECORDS,  # the flush timer gets there
                 marks=pytest.mark.slow),
    ({}, 0),  # Kafka's default: the page cache, replication for durability
], ids=["messages=1", "messages=10", "ms=100", "default"])
def test_flush_policy_moves_the_recovery_point(fresh_broker: BrokerProcess, topic_name: str,
                                               policy: dict[str, str], flushed: int) -> None:
    fresh_broker.overrides = {"log.flush.offset.checkpoint.interval.ms": "100",
                              "log.flush.scheduler.interval.ms": "50", **policy}
    fresh_broker.start()
    create_topic(fresh_broker.bootstrap, topic_name)
    _produce_one_by_one(fresh_broker.bootstrap, topic_name)
    acked = time.time()
    if flushed:
        deadline = time.monotonic() + 20
        while _checkpointed_after(fresh_broker, topic_name, acked) < flushed:
            assert time.monotonic() < deadline, "the recovery point never reached the end"
    else:
        assert _checkpointed_after(fresh_broker, topic_name, acked) == 0
