"""A real odradek cluster for tests: one ZooKeeper and N broker subprocesses.

    with Cluster(tmp_path, size=3, configs={"min.insync.replicas": "2"}) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        c.kill(2)                                   # SIGKILL: its session lingers
        c.wait_for(lambda: c.describe().controller.id != 2, what="a new controller")
        c.start(2)                                  # same port and data dir

or the module fixture `cluster` (3 brokers). Brokers are tests/conftest.py's
BrokerProcess (`python -m odradek broker --override …`), with node.id 1..N, a chroot of
their own in the ZooKeeper, short session timeouts (so a killed broker is noticed in
seconds), and the internal topics at replication factor min(3, N). Each broker's log
is `broker-<port>.log` next to its data dir.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import pytest

from tests.conftest import BrokerProcess, free_port
from tests.zk import ZooKeeperProcess, start_zookeeper, zookeeper_available

SESSION_TIMEOUT_MS = 4000
T = TypeVar("T")


class Cluster:
    def __init__(self, base: Path, size: int = 3, configs: Mapping[str, str] | None = None,
                 broker_configs: Mapping[int, Mapping[str, str]] | None = None,
                 racks: Mapping[int, str] | None = None,
                 zookeeper: ZooKeeperProcess | None = None) -> None:
        """`configs` go to every broker, `broker_configs[id]` to one; `racks` sets
        broker.rack. A `zookeeper` given is shared (the cluster takes a chroot in it)."""
        self.base = base
        self.size = size
        self._own_zk = zookeeper is None
        self.zookeeper = zookeeper or ZooKeeperProcess(base / "zookeeper" / "data")
        self.chroot = f"/odradek-{uuid.uuid4().hex[:8]}"
        rf = str(min(3, size))
        common = {
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            **(configs or {}),
        }
        self.brokers: dict[int, BrokerProcess] = {}
        self._started: set[int] = set()  # node ids started at least once
        # librdkafka settings the harness's own clients need (a secured cluster's login)
        self.client_settings: dict[str, Any] = {}
        for node_id in range(1, size + 1):
            overrides = {"node.id": str(node_id), **common,
                         **(broker_configs or {}).get(node_id, {})}
            if racks and node_id in racks:
                overrides["broker.rack"] = racks[node_id]
            self.brokers[node_id] = BrokerProcess(base / f"broker{node_id}" / "data",
                                                  overrides=overrides)

    # ---- lifecycle --------------------------------------------------------------------

    def __enter__(self) -> Cluster:
        return self.up()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.down()

    def up(self, timeout: float = 60.0) -> Cluster:
        if not zookeeper_available():
            pytest.fail("ZooKeeper is not installed: run scripts/install-system-deps")
        if self._own_zk:
            start_zookeeper(self.zookeeper)
        for b in self.brokers.values():
            b.overrides["zookeeper.connect"] = self.connect
        try:
            for node_id in self.brokers:
                self.start(node_id, timeout=timeout)
            self.wait_formed(timeout=timeout)
        except BaseException:
            self.down()
            raise
        return self

    def down(self) -> None:
        for b in self.brokers.values():
            b.stop()
        if self._own_zk:
            self.zookeeper.stop()

    @property
    def connect(self) -> str:
        """zookeeper.connect of this cluster (with its chroot)."""
        return f"{self.zookeeper.connect}{self.chroot}"

    @property
    def bootstrap(self) -> str:
        """bootstrap.servers: every broker that is running."""
        return ",".join(b.bootstrap for b in self.brokers.values() if b.alive())

    def broker(self, node_id: int) -> BrokerProcess:
        return self.brokers[node_id]

    def alive(self) -> list[int]:
        return [i for i, b in self.brokers.items() if b.alive()]

    def kill(self, node_id: int) -> None:
        """SIGKILL: the broker's ZooKeeper session lives on until it times out."""
        self.brokers[node_id].kill()

    def stop(self, node_id: int) -> None:
        """SIGTERM: a clean stop closes its session; the others take over at once."""
        self.brokers[node_id].stop()

    def start(self, node_id: int, timeout: float = 60.0) -> BrokerProcess:
        """(Re)start a broker with its port and data dir; returns once it serves."""
        broker = self.brokers[node_id]
        broker.log_path.parent.mkdir(parents=True, exist_ok=True)
        first = node_id not in self._started
        for attempt in range(3):
            try:
                started = broker.start(timeout=timeout)
                break
            except RuntimeError as e:
                # The port was picked when the cluster was made, from the kernel's
                # ephemeral range: an outgoing connection (to ZooKeeper, to a broker
                # started before) can take it meanwhile. Before its first start no one
                # knows the port yet, so another one will do.
                if (not first or attempt == 2 or "listeners" in broker.overrides
                        or "Address already in use" not in str(e)):
                    raise
                broker.port = free_port()
        self._started.add(node_id)
        return started

    def logs(self, node_id: int) -> str:
        return self.brokers[node_id].logs()

    # ---- waiting and looking --------------------------------------------------------

    def wait_for(self, predicate: Callable[[], T | None], timeout: float = 30.0,
                 what: str = "", interval: float = 0.1) -> T:
        """Poll `predicate` until it returns something truthy (returned); exceptions
        while polling count as not yet (a broker may be restarting)."""
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while True:
            try:
                value = predicate()
                if value:
                    return value
            except Exception as e:  # not yet (a broker restarting); told at the timeout
                last = e
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for "
                                     f"{what or predicate}" + (f": {last!r}" if last else ""))
            time.sleep(interval)

    def admin(self, node_id: int | None = None) -> Any:
        """A confluent-kafka AdminClient on one broker (or on all running ones)."""
        from confluent_kafka.admin import AdminClient

        servers = self.bootstrap if node_id is None else self.brokers[node_id].bootstrap
        return AdminClient(client_config(servers, **self.client_settings))

    def describe(self, node_id: int | None = None, timeout: float = 5.0) -> Any:
        """DescribeCluster through one broker: .controller, .nodes, .cluster_id."""
        admin = self.admin(node_id)  # held until the answer: a dropped client cancels it
        return admin.describe_cluster(request_timeout=timeout).result(timeout)

    def partitions(self, topic: str, node_id: int | None = None,
                   timeout: float = 5.0) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
        """{partition: (leader, replicas, isr)} as one broker's Metadata answers it."""
        md = self.admin(node_id).list_topics(topic, timeout=timeout)
        t = md.topics[topic]
        if t.error is not None:
            raise AssertionError(f"{topic}: {t.error}")
        return {p.id: (p.leader, tuple(p.replicas), tuple(p.isrs))
                for p in t.partitions.values()}

    def wait_formed(self, timeout: float = 60.0) -> None:
        """Every running broker sees every running broker, and one controller."""
        want = set(self.alive())

        def formed() -> bool:
            for node_id in want:
                d = self.describe(node_id)
                if {n.id for n in d.nodes} != want or d.controller is None:
                    return False
            return True

        self.wait_for(formed, timeout, "the cluster to form")


def client_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """librdkafka settings for tests: quiet logs, fast metadata refresh."""
    return {"bootstrap.servers": bootstrap, "log_level": 0,
            "topic.metadata.refresh.interval.ms": 1000, "socket.timeout.ms": 5000, **extra}


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """librdkafka writes its connection errors to fd 2 from C: silence them while a
    test kills brokers on purpose."""
    saved = os.dup(2)
    with open(os.devnull, "wb") as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three brokers and a ZooKeeper for a test module; tests use their own topics."""
    with Cluster(tmp_path_factory.mktemp("cluster"), size=3) as c:
        yield c
