"""queued.max.request.bytes: the memory pool every connection's request bytes come from."""

from __future__ import annotations

import pytest

from odradek.configdef import ConfigError
from odradek.server.config import BrokerConfig
from odradek.server.memory_pool import MemoryPool


def test_a_connection_that_cannot_take_waits_and_is_served_in_turn() -> None:
    pool = MemoryPool(100)
    assert pool.try_take(60)
    assert not pool.try_take(50)
    served: list[str] = []
    pool.wait(lambda: served.append("a"), 50, 0)
    assert not pool.try_take(10), "a newcomer does not pass one waiting in line"
    pool.wait(lambda: served.append("b"), 30, 0)
    pool.give(20)  # 40 used: a's 50 fits, b's 30 does not after it
    assert served == ["a"] and pool.used == 90
    pool.give(60)
    assert served == ["a", "b"] and pool.used == 60


def test_partial_frames_waiting_on_each_other_do_not_wait_forever() -> None:
    pool = MemoryPool(100)
    assert pool.try_take(50) and pool.try_take(50)  # two half-read frames
    served: list[str] = []
    pool.wait(lambda: served.append("a"), 50, 50)
    assert served == []  # b's memory may still come back
    pool.wait(lambda: served.append("b"), 50, 50)
    assert served == ["a"], "everything lent is held by waiters: the first goes on"


def test_unbounded_pool_counts_and_never_refuses() -> None:
    pool = MemoryPool(-1)
    assert pool.try_take(1 << 40) and not pool.exhausted
    assert pool.peak == 1 << 40


def test_queued_max_request_bytes_default_and_kafka_check() -> None:
    assert BrokerConfig.load(None, {})["queued.max.request.bytes"] == 104_857_600
    bigger = BrokerConfig.load(None, {"socket.request.max.bytes": "209715200"})
    assert bigger["queued.max.request.bytes"] == 209_715_200
    assert BrokerConfig.load(None, {"queued.max.request.bytes": "-1"})[
        "queued.max.request.bytes"] == -1
    with pytest.raises(ConfigError, match=r"must be larger or equal to socket\.request\.max"):
        BrokerConfig.load(None, {"queued.max.request.bytes": "1000"})
