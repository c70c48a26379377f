"""The share group coordinator on the runtime: members, epochs, assignment, and the
session timeout that removes a silent member and hands back what it held."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from odradek.coordinator.group.consumer import TopicsView
from odradek.coordinator.share import ShareConfig, ShareGroupCoordinator
from odradek.protocol.errors import ErrorCode, KafkaError

TOPIC_ID = uuid.uuid4()


def topics() -> TopicsView:
    return TopicsView(lambda n: (TOPIC_ID, 3) if n == "jobs" else None,
                      lambda t: "jobs" if t == TOPIC_ID else None, lambda: ["jobs"])


async def loaded(coordinator: ShareGroupCoordinator) -> None:
    coordinator.follow(range(coordinator.config.offsets_partitions))
    for _ in range(1000):
        if not coordinator.runtime.loading:
            return
        await asyncio.sleep(0)
    raise AssertionError("the share coordinator did not load")


def join(c: ShareGroupCoordinator, member: str, names: list[str] | None = None,
         epoch: int = 0) -> tuple[int, dict[uuid.UUID, frozenset[int]] | None]:
    r = c.heartbeat("g", member, epoch, rack_id=None,
                    subscribed_names=["jobs"] if names is None and epoch == 0 else names,
                    client_id="c", client_host="/127.0.0.1")
    assert r.error == ErrorCode.none
    return r.epoch, r.assignment


def test_every_member_gets_every_partition_with_its_own_epoch() -> None:
    asyncio.run(_every_member())


async def _every_member() -> None:
    c = ShareGroupCoordinator(ShareConfig(offsets_partitions=3), topics())
    await loaded(c)
    e1, a1 = join(c, "m1")
    e2, a2 = join(c, "m2")
    assert a1 == a2 == {TOPIC_ID: frozenset({0, 1, 2})}
    assert (e1, e2) == (1, 2)
    assert join(c, "m1", None, e1) == (e1, None)  # nothing changed: no assignment sent
    with pytest.raises(KafkaError) as e:
        join(c, "m1", None, e1 + 5)
    assert e.value.code == ErrorCode.fenced_member_epoch
    e1b, a1b = join(c, "m1", ["other"], e1)  # a new subscription: a new epoch
    assert e1b > e2 and a1b == {}
    group = c.group("g")
    assert group is not None and group.state_name == "Stable"
    c.stop()


def test_a_silent_member_is_removed_after_the_session_timeout() -> None:
    asyncio.run(_silent_member())


async def _silent_member() -> None:
    left: list[tuple[str, str]] = []
    c = ShareGroupCoordinator(ShareConfig(offsets_partitions=3, session_timeout_ms=50),
                              topics(), lambda g, m: left.append((g, m)))
    await loaded(c)
    join(c, "m1")
    for _ in range(200):
        if left:
            break
        await asyncio.sleep(0.01)
    assert left == [("g", "m1")]
    group = c.group("g")
    assert group is not None and group.state_name == "Empty"
    c.stop()
