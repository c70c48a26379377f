"""In-process "brokers" for the ZooKeeper metadata tests: a store and a controller each,
on one event loop, with no logs and no listeners — only what the znodes say."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient

from odradek.cluster.metadata import BrokerInfo, MetadataImage
from odradek.cluster.zk_client import ZkSession
from odradek.cluster.zk_store import ZkMetadataStore

SESSION_MS = 4000


class Node:
    """One broker's metadata side: session, store, controller."""

    def __init__(self, connect: str, node_id: int, rack: str | None = None,
                 configs: dict[str, Any] | None = None) -> None:
        self.connect = connect
        self.node_id = node_id
        self.configs: dict[str, Any] = {
            "num.partitions": 1, "default.replication.factor": 1,
            "unclean.leader.election.enable": False, "auto.leader.rebalance.enable": False,
            "leader.imbalance.check.interval.seconds": 300,
            "leader.imbalance.per.broker.percentage": 10, "delete.topic.enable": True,
            **(configs or {})}
        self.info = BrokerInfo(node_id, "127.0.0.1", 9000 + node_id, rack,
                               (("PLAINTEXT", "127.0.0.1", 9000 + node_id),))
        self.session = ZkSession(connect, session_timeout_ms=SESSION_MS,
                                 connection_timeout_ms=10_000)
        self.store = ZkMetadataStore(self.session, local_broker=self.info,
                                     broker_defaults=lambda: self.configs)
        self.events: list[tuple[str, str]] = []

    async def start(self) -> Node:
        self.session.start()
        await self.store.start("test-cluster")
        await self.store.register()
        self.store.add_listener(lambda e, _o, _n, t: self.events.append((e, t)))
        self.store.start_controller()
        return self

    def stop(self) -> None:
        self.store.stop()
        self.session.stop()

    @property
    def image(self) -> MetadataImage:
        return self.store.image

    def expire_session(self) -> None:
        """A real expiry: a second client with our session id and password closes it."""
        session_id, password = self.session.client.client_id
        other = KazooClient(hosts=self.connect, client_id=(session_id, password),
                            timeout=SESSION_MS / 1000)
        other.start(10)
        other.stop()
        other.close()


async def until(predicate: Callable[[], Any], timeout: float = 15.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        await asyncio.sleep(0.05)


def active_controller(nodes: list[Node]) -> Node | None:
    active = [n for n in nodes if n.store.controller is not None and n.store.controller.active]
    return active[0] if len(active) == 1 else None
