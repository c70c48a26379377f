"""A small admin request cannot hold the broker: a topic of many partitions opens in
slices of the event loop while other clients are answered, and a request that would
write more than Kafka's 10,000 metadata records (QuorumController.MAX_RECORDS_PER_USER_OP)
is refused whole with POLICY_VIOLATION, as Kafka's controller refuses it. Found by the
fuzz test: a mutated CreateTopics whose num_partitions became thousands kept another
client's ApiVersions waiting for seconds."""

from __future__ import annotations

import datetime
import itertools
import threading
import time
from typing import Any

from odradek.protocol.errors import ErrorCode
from tests.conftest import BrokerProcess
from tests.security.authz import make
from tests.wire import WireClient

MS = datetime.timedelta(milliseconds=1)


def _create(w: WireClient, name: str, partitions: int) -> Any:
    topic = make(w.schema(19, 7).CreatableTopic, name=name, num_partitions=partitions,
                 replication_factor=1)
    return w.call(19, 7, topics=(topic,), timeout=120_000 * MS).topics[0]


def _partitions(w: WireClient, name: str) -> int:
    [topic] = w.call(3, 12, topics=(make(w.schema(3, 12).MetadataRequestTopic, name=name),),
                     include_topic_authorized_operations=False).topics
    return len(topic.partitions) if topic.error_code == ErrorCode.none else 0


def test_more_than_ten_thousand_records_are_refused_whole(broker: BrokerProcess) -> None:
    with WireClient(broker.bootstrap, timeout=60) as w:
        for count in (2**31 - 1, 10_000):  # + its TopicRecord: 10,001 records
            refused = _create(w, f"huge-{count}", count)
            assert refused.error_code == ErrorCode.policy_violation
            assert refused.error_message == "Unable to perform excessively large batch " \
                                            "operation."
            assert _partitions(w, f"huge-{count}") == 0
        assert _create(w, "grows", 1).error_code == ErrorCode.none
        grow = make(w.schema(37, 3).CreatePartitionsTopic, name="grows", count=200_000,
                    assignments=None)
        [result] = w.call(37, 3, topics=(grow,), timeout=60_000 * MS,
                          validate_only=False).results
        assert result.error_code == ErrorCode.policy_violation
        assert _partitions(w, "grows") == 1


def test_other_clients_are_answered_while_a_big_topic_opens(broker: BrokerProcess) -> None:
    answered_during: list[float] = []
    creating = threading.Event()
    done = threading.Event()

    def probe() -> None:
        with WireClient(broker.bootstrap, timeout=60) as p:
            while not done.is_set():
                p.call(18, 3, client_software_name="probe", client_software_version="1")
                if creating.is_set() and not done.is_set():
                    answered_during.append(time.monotonic())

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    with WireClient(broker.bootstrap, timeout=120) as w:
        creating.set()
        started = time.monotonic()
        created = _create(w, "opens-in-slices", 600)
        finished = time.monotonic()
        done.set()
    prober.join(60)
    assert created.error_code == ErrorCode.none
    # the create took a while (600 logs' files): the other client was answered all
    # along — no wait between two of its answers near the length of the create (before,
    # the logs were opened in one go and it waited for most of it)
    moments = [started, *(t for t in answered_during if started < t < finished), finished]
    longest = max(b - a for a, b in itertools.pairwise(moments))
    assert longest < (finished - started) / 3, \
        f"waited {longest:.2f}s during a create of {finished - started:.2f}s"
