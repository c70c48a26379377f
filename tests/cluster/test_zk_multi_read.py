"""The controller's bulk reads through ZooKeeper's multiRead, against a real ZooKeeper:
the same answers as one getData per path (data, version, missing znodes), under a
chroot too, and in batches past READ_BATCH."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.cluster.zk_client import READ_BATCH, ZkSession
from tests.zk import ZooKeeperProcess, zookeeper  # noqa: F401  (fixture)


@pytest.fixture(params=["", "/chrooted"])
def session(request: pytest.FixtureRequest,
            zookeeper: ZooKeeperProcess) -> Iterator[ZkSession]:  # noqa: F811
    zk = ZkSession(zookeeper.connect + request.param, session_timeout_ms=6000,
                   connection_timeout_ms=5000)
    zk.start()
    try:
        yield zk
    finally:
        zk.stop()


def test_read_many_answers_as_get_many_does(session: ZkSession) -> None:
    session.ensure_path("/many")
    paths = [f"/many/z{i}" for i in range(READ_BATCH * 2 + 7)]
    for i, path in enumerate(paths):
        if i % 5:
            session.create_or_set(path, f"value {i}".encode())
    session.set(paths[1], b"changed")  # version 1
    one_by_one = session.get_many(paths)
    together = session.read_many(paths)
    assert len(together) == len(paths)
    assert [None if r is None else (r[0], r[1].version) for r in together] == \
        [None if r is None else (r[0], r[1].version) for r in one_by_one]
    assert together[0] is None and together[1] is not None
    assert together[1][0] == b"changed" and together[1][1].version == 1
    assert session.read_many([]) == []
