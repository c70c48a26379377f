"""A real ZooKeeper for tests: odradek.cluster.local_zookeeper's process as a module fixture."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.cluster.local_zookeeper import (
    ZooKeeperProcess,
    four_letter_word,
    zookeeper_available,
)
from tests.processes import reap_on_exit

__all__ = ["ZooKeeperProcess", "four_letter_word", "start_zookeeper", "zookeeper",
           "zookeeper_available"]


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    """One ZooKeeper node for a test module."""
    if not zookeeper_available():
        pytest.fail("ZooKeeper is not installed: run scripts/install-system-deps")
    zk = start_zookeeper(ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper") / "data"))
    yield zk
    zk.stop()


def start_zookeeper(zk: ZooKeeperProcess, timeout: float = 30.0) -> ZooKeeperProcess:
    """Start a node, reaped should the test run die, stopped if it never gets ready."""
    zk.start(wait=False)
    assert zk.proc is not None
    reap_on_exit(zk.proc)
    try:
        zk.wait_ready(timeout)
    except BaseException:
        zk.stop()
        raise
    return zk
