"""A real ZooKeeper for tests: odradek.cli.local_zookeeper's process as a module fixture."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.cli.local_zookeeper import (
    ZooKeeperProcess,
    four_letter_word,
    zookeeper_available,
)

__all__ = ["ZooKeeperProcess", "four_letter_word", "zookeeper", "zookeeper_available"]


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    """One ZooKeeper node for a test module."""
    if not zookeeper_available():
        pytest.fail("ZooKeeper is not installed: run scripts/install-system-deps")
    zk = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper") / "data").start()
    yield zk
    zk.stop()
