"""Real partitions for the coordinator runtime: a `storage.Log` in a temp dir behind
the replica manager's `Partition`, reached through the runtime's own `ReplicaLog`."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.coordinator.runtime import ReplicaLog
from odradek.replication.partition import Partition
from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig

TOPIC = "__state"


class Replicas:
    """The replica manager as `ReplicaLog` sees it: partitions by (topic, index)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.partitions: dict[tuple[str, int], Partition] = {}

    def add(self, topic: str, index: int, *, followers: tuple[int, ...] = ()) -> Partition:
        """A partition this broker (0) leads; with followers, acks=all waits for them."""
        log = Log.open(self.root / f"{topic}-{index}", LogConfig(cleanup_policy=("compact",)))
        p = Partition(topic, index, uuid.uuid4(), log, leader_epoch=7, node_id=0, leader=0)
        if followers:
            p.solo = False
            p.replicas = p.isr = (0, *followers)
        self.partitions[(topic, index)] = p
        return p

    def get(self, topic: str, index: int) -> Partition:
        return self.partitions[(topic, index)]

    def close(self) -> None:
        for p in self.partitions.values():
            p.log.close()


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Replicas]:
    r = Replicas(tmp_path)
    try:
        yield r
    finally:
        r.close()


def replica_log(replicas: Replicas, topic: str = TOPIC, timeout_ms: int = 5000) -> ReplicaLog:
    return ReplicaLog(replicas, topic, lambda: timeout_ms)
