"""`share.isolation.level=read_committed` (a group config, as Kafka's): a share group
delivers committed transactions' records and never an aborted one's; read_uncommitted
(the default) delivers both, as Kafka does."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.conftest import BrokerProcess
from tests.share.helpers import (
    earliest_group,
    new_topic,
    poll_until,
    produce,
    set_group_config,
    share_consumer,
)


def transactions(bootstrap: str, topic: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap,
                  "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"aborted")
    p.flush(30)  # in the log before the abort: librdkafka purges what it has not sent
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"committed")
    p.commit_transaction(30)


def values(bootstrap: str, group: str, topic: str) -> list[bytes]:
    with share_consumer(bootstrap, group, topic) as c:
        def accept(batch: list[Any]) -> None:
            for m in batch:
                c.acknowledge(m)
            assert all(e is None for e in c.commit_sync(30).values())

        got = poll_until(c, lambda seen: any(m.value() == b"last" for m in seen),
                         on_batch=accept)
    return [m.value() for m in got]


def test_read_committed_share_groups_never_deliver_aborted_records(
        share_broker: BrokerProcess) -> None:
    b = share_broker.bootstrap
    topic = new_topic(b)
    transactions(b, topic)
    produce(b, topic, ["last"])
    committed = earliest_group(b)
    set_group_config(b, committed, "share.isolation.level", "read_committed")
    assert values(b, committed, topic) == [b"committed", b"last"]
    uncommitted = earliest_group(b)
    assert values(b, uncommitted, topic) == [b"aborted", b"committed", b"last"]


def test_an_unknown_isolation_level_is_refused(share_broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException, match=r"INVALID_CONFIG|Invalid value"):
        set_group_config(share_broker.bootstrap, f"g-{uuid.uuid4().hex[:8]}",
                         "share.isolation.level", "serializable")
