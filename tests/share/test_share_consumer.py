"""Share groups with confluent-kafka's ShareConsumer (librdkafka's KIP-932 client).

A ShareConsumer against a broker without share groups silently receives nothing, so
every test here asserts deliveries, never only the absence of errors.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import AcknowledgeType

from tests.conftest import BrokerProcess
from tests.processes import started
from tests.share.helpers import (
    earliest_group,
    new_topic,
    poll_until,
    produce,
    share_consumer,
    wait_for,
)
from tests.wire import WireClient

WORKERS = 5


def members(bootstrap: str, group: str) -> int:
    with WireClient(bootstrap) as c:
        r = c.call(77, 1, group_ids=(group,), include_authorized_operations=False)
    g = r.groups[0]
    return len(g.members) if g.error_code == 0 else 0


def lines(log: Path) -> list[dict[str, Any]]:
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def worker(bootstrap: str, group: str, topic: str, mode: str) -> list[str]:
    return [sys.executable, "-m", "tests.share.worker", bootstrap, group, topic, mode]


def test_five_workers_share_one_partition_and_each_record_is_accepted_once(
        share_broker: BrokerProcess, tmp_path: Path) -> None:
    bootstrap = share_broker.bootstrap
    topic = new_topic(bootstrap)
    group = earliest_group(bootstrap)
    logs = [tmp_path / f"worker-{i}.log" for i in range(WORKERS)]
    with contextlib.ExitStack() as stack:
        for log in logs:
            stack.enter_context(started(worker(bootstrap, group, topic, "accept"), log,
                                        sigint_ignored=True))
        wait_for(lambda: members(bootstrap, group) == WORKERS, 60, "workers did not join")
        produced = 0

        def workers_with_records() -> int:
            return sum(1 for log in logs if any("offset" in x for x in lines(log)))

        # one record at a time, so the waiting workers race for each: until several
        # of them have had work (bounded: a broker serving one member only fails)
        while produced < 300 and (produced < 100 or workers_with_records() < 3):
            produce(bootstrap, topic, [f"job-{produced}"])
            produced += 1

        def accepted() -> list[int]:
            return [o for log in logs for x in lines(log) for o in x.get("accepted", ())]

        wait_for(lambda: len(set(accepted())) >= produced or None, 60,
                 "not every record was accepted")
    everything = accepted()
    assert sorted(everything) == list(range(produced)), "a record accepted twice or never"
    assert workers_with_records() >= 3


def test_a_released_record_is_redelivered_to_another_consumer(
        share_broker: BrokerProcess) -> None:
    bootstrap = share_broker.bootstrap
    topic = new_topic(bootstrap)
    group = earliest_group(bootstrap)
    produce(bootstrap, topic, ["only"])
    with share_consumer(bootstrap, group, topic) as first:
        got = poll_until(first, lambda seen: len(seen) >= 1)
        assert [(m.offset(), m.delivery_count()) for m in got] == [(0, 1)]
        first.acknowledge(got[0], AcknowledgeType.RELEASE)
        results = first.commit_sync(30)
        assert results and all(e is None for e in results.values())
        with share_consumer(bootstrap, group, topic) as second:
            again = poll_until(second, lambda seen: len(seen) >= 1,
                               on_batch=lambda b: [second.acknowledge(m) for m in b])
            assert [(m.offset(), m.delivery_count(), m.value()) for m in again] == \
                [(0, 2, b"only")]
            assert all(e is None for e in second.commit_sync(30).values())


def test_a_killed_workers_records_are_redelivered_after_the_lock_duration(
        short_lock_broker: BrokerProcess, tmp_path: Path) -> None:
    bootstrap = short_lock_broker.bootstrap
    topic = new_topic(bootstrap)
    group = earliest_group(bootstrap)
    produce(bootstrap, topic, [f"job-{i}" for i in range(5)])
    log = tmp_path / "victim.log"
    with started(worker(bootstrap, group, topic, "hold"), log, sigint_ignored=True) as victim:
        held = wait_for(lambda: [x["offset"] for x in lines(log) if "offset" in x], 60,
                        "the worker got nothing")
        victim.send_signal(signal.SIGKILL)
        victim.wait(30)
    assert sorted(held) == [0, 1, 2, 3, 4]
    with share_consumer(bootstrap, group, topic) as survivor:
        got = poll_until(survivor, lambda seen: len({m.offset() for m in seen}) >= 5,
                         on_batch=lambda b: [survivor.acknowledge(m) for m in b])
        assert sorted((m.offset(), m.delivery_count()) for m in got) == \
            [(o, 2) for o in range(5)]
        assert all(e is None for e in survivor.commit_sync(30).values())


def test_a_rejected_record_is_archived_and_never_delivered_again(
        share_broker: BrokerProcess) -> None:
    bootstrap = share_broker.bootstrap
    topic = new_topic(bootstrap)
    group = earliest_group(bootstrap)
    produce(bootstrap, topic, ["poison", "good"])
    with share_consumer(bootstrap, group, topic) as c:
        def judge(batch: list[Any]) -> None:
            for m in batch:
                c.acknowledge(m, AcknowledgeType.REJECT if m.value() == b"poison"
                              else AcknowledgeType.ACCEPT)
            assert all(e is None for e in c.commit_sync(30).values())

        first = poll_until(c, lambda seen: len(seen) >= 2, on_batch=judge)
        assert sorted(m.offset() for m in first) == [0, 1]
        produce(bootstrap, topic, ["after"])
        later = poll_until(c, lambda seen: any(m.value() == b"after" for m in seen),
                           on_batch=judge)
        assert [m.offset() for m in later] == [2]


def test_a_record_delivered_delivery_count_limit_times_is_archived(
        share_broker: BrokerProcess) -> None:
    bootstrap = share_broker.bootstrap
    topic = new_topic(bootstrap)
    group = earliest_group(bootstrap)
    produce(bootstrap, topic, ["unlucky"])
    counts: list[int] = []
    with share_consumer(bootstrap, group, topic) as c:
        def release(batch: list[Any]) -> None:
            for m in batch:
                counts.append(m.delivery_count())
                c.acknowledge(m, AcknowledgeType.RELEASE if m.offset() == 0
                              else AcknowledgeType.ACCEPT)
            assert all(e is None for e in c.commit_sync(30).values())

        poll_until(c, lambda seen: len(seen) >= 5, on_batch=release)
        produce(bootstrap, topic, ["next"])
        later = poll_until(c, lambda seen: any(m.offset() == 1 for m in seen),
                           on_batch=release)
    assert counts[:5] == [1, 2, 3, 4, 5]  # group.share.delivery.count.limit=5
    assert [m.offset() for m in later] == [1], "the archived record came back"


def test_implicit_mode_accepts_what_the_previous_poll_returned(
        share_broker: BrokerProcess) -> None:
    bootstrap = share_broker.bootstrap
    topic = new_topic(bootstrap)
    group = earliest_group(bootstrap)
    produce(bootstrap, topic, [f"r{i}" for i in range(10)])
    with share_consumer(bootstrap, group, topic, explicit=False) as c:
        got = poll_until(c, lambda seen: len(seen) >= 10)
        assert sorted(m.offset() for m in got) == list(range(10))
        assert c.commit_sync(30) is not None
    with share_consumer(bootstrap, group, topic, explicit=False) as again:
        produce(bootstrap, topic, ["r10"])
        later = poll_until(again, lambda seen: len(seen) >= 1)
        assert [m.offset() for m in later] == [10], "accepted records came back"




def test_a_killed_workers_records_come_back_when_its_connection_drops(
        share_broker: BrokerProcess, tmp_path: Path) -> None:
    """The lock is Kafka's 30 s here: the records come back because the dead worker's
    connection closed its share session, long before the lock would expire."""
    bootstrap = share_broker.bootstrap
    topic = new_topic(bootstrap)
    group = earliest_group(bootstrap)
    produce(bootstrap, topic, [f"job-{i}" for i in range(3)])
    log = tmp_path / "victim.log"
    with started(worker(bootstrap, group, topic, "hold"), log, sigint_ignored=True) as victim:
        held = wait_for(lambda: [x["offset"] for x in lines(log) if "offset" in x], 60,
                        "the worker got nothing")
        victim.send_signal(signal.SIGKILL)
        victim.wait(30)
        killed_at = time.monotonic()
    assert sorted(held) == [0, 1, 2]
    with share_consumer(bootstrap, group, topic) as survivor:
        got = poll_until(survivor, lambda seen: len({m.offset() for m in seen}) >= 3,
                         on_batch=lambda b: [survivor.acknowledge(m) for m in b],
                         timeout=25)
        assert time.monotonic() - killed_at < 30, "released only by the lock's expiry"
        assert sorted((m.offset(), m.delivery_count()) for m in got) == \
            [(0, 2), (1, 2), (2, 2)]
        assert all(e is None for e in survivor.commit_sync(30).values())
