"""How long a join and a rebalance take, measured with real clients and printed.

The first join of a new group waits `group.initial.rebalance.delay.ms` (3 s, Kafka's
default) for more members, and not a moment longer: never a session timeout.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.conftest import BrokerProcess
from tests.groups.helpers import balanced, create_topic, member, poll_until, unique

DEFAULT_DELAY_S = 3.0


@pytest.fixture(scope="module")
def default_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("timing") / "data").start()  # Kafka's 3 s delay
    yield b
    b.stop()


def test_first_join_completes_within_the_initial_rebalance_delay(
        default_broker: BrokerProcess) -> None:
    bootstrap = default_broker.bootstrap
    topic, group = unique("first"), unique("g")
    create_topic(bootstrap, topic, 3)
    # __consumer_offsets is created by the first FindCoordinator: do that beforehand
    Consumer({"bootstrap.servers": bootstrap, "group.id": group}).committed(
        [TopicPartition(topic, 0)], timeout=10)
    start = time.monotonic()
    c = member(bootstrap, group, topic, "c", **{"session.timeout.ms": 45000})
    took = poll_until([c], lambda: len(c.assigned) == 3, 30)
    print(f"\njoin-to-assignment of a new group: {took * 1000:.0f} ms "
          f"(group.initial.rebalance.delay.ms=3000, session.timeout.ms=45000)")
    # not before the delay; after it, only what a busy machine adds (a loaded 2-core
    # machine adds seconds), never the 45 s session timeout
    assert DEFAULT_DELAY_S - 0.1 <= took <= DEFAULT_DELAY_S + 10.0
    assert time.monotonic() - start < 45
    c.close()


def test_rebalance_pause_when_a_member_joins(group_broker: BrokerProcess) -> None:
    """Eager (range): the existing member stops from its revoke to its next assign."""
    bootstrap = group_broker.bootstrap
    topic, group = unique("pause"), unique("g")
    create_topic(bootstrap, topic, 4)
    first = member(bootstrap, group, topic, "first")
    joined = poll_until([first], lambda: len(first.assigned) == 4, 10)
    second = member(bootstrap, group, topic, "second")
    took = poll_until([first, second], balanced([first, second], 4), 10)
    revoke = next(t for t, kind, _ in first.events if kind == "revoke")
    reassigned = next(t for t, kind, _ in first.events if kind == "assign" and t > revoke)
    pause = reassigned - revoke
    print(f"\nfirst join (initial delay 200 ms): {joined * 1000:.0f} ms; a second member: "
          f"group settled in {took * 1000:.0f} ms, the first member paused "
          f"{pause * 1000:.0f} ms (revoke → assign)")
    assert pause < 4.0  # a heartbeat or two on a busy machine; a session (6 s) is a bug
    first.close()
    second.close()


def test_rebalance_pause_with_cooperative_sticky(group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("pause-coop"), unique("g")
    create_topic(bootstrap, topic, 4)
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    first = member(bootstrap, group, topic, "first", **conf)
    poll_until([first], lambda: len(first.assigned) == 4, 10)
    second = member(bootstrap, group, topic, "second", **conf)
    took = poll_until([first, second], balanced([first, second], 4), 10)
    revoked = [ps for _, kind, ps in first.events if kind == "revoke"]
    print(f"\ncooperative: group settled in {took * 1000:.0f} ms; the first member gave up "
          f"{revoked} and never stopped reading the rest")
    assert len(first.assigned) == 2 and all(len(ps) == 2 for ps in revoked)
    first.close()
    second.close()
