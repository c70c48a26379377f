"""`EmbeddedCluster`: replicated brokers on a local ZooKeeper, for tests of what only a
cluster does — replica fetchers, the ISR, leader elections, acks=all.

    with EmbeddedCluster(3) as cluster:
        cluster.create_topic("orders", partitions=1, replication_factor=3)
        leader = cluster.leader("orders", 0)
        cluster.kill(leader)           # SIGKILL; its ZooKeeper session expires
        cluster.wait_for_leader("orders", 0, not_on=leader)

Each broker is a child process (testing/child.py), so `kill` is a real crash and
`pause` a real freeze (SIGSTOP: no serving, no fetching, no ZooKeeper heartbeats).
ZooKeeper is Debian's, started here (the fastest metadata backend on this machine:
about 0.4 s for one node); the brokers import themselves while it starts.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from odradek.testing.child import ChildBroker, RemoteFaults
from odradek.testing.config import TEST_DEFAULTS, TestkitError, broker_properties, temp_root
from odradek.testing.embedded import ConfigValue
from odradek.testing.zygote import Zygote

__all__ = ["EmbeddedCluster"]

T = TypeVar("T")

_live: set[EmbeddedCluster] = set()


def running_clusters() -> list[EmbeddedCluster]:
    """Clusters started and not stopped yet (the pytest plugin checks at the end)."""
    return list(_live)


@atexit.register
def _stop_leftovers() -> None:
    for cluster in running_clusters():
        with contextlib.suppress(Exception):
            cluster.stop()


# Short enough that a killed broker's partitions move within seconds, long enough that
# a busy 2-core machine does not expire a live broker's session.
CLUSTER_DEFAULTS = {
    **TEST_DEFAULTS,
    "zookeeper.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "5000",
    "replica.fetch.backoff.ms": "100",
    "auto.leader.rebalance.enable": "false",
}


class SharedZooKeeper:
    """A ZooKeeper node for several clusters (each takes a chroot), data in a temp dir."""

    def __init__(self) -> None:
        self._root: Path | None = None
        self._zk: Any = None

    def start(self, wait: bool = True, timeout: float = 60.0) -> SharedZooKeeper:
        from odradek.cluster.local_zookeeper import ZooKeeperProcess, zookeeper_available

        if not zookeeper_available():
            raise TestkitError("EmbeddedCluster needs ZooKeeper and Java: install Debian's "
                               "`zookeeper` package")
        self._root = Path(tempfile.mkdtemp(prefix="odradek-zookeeper-", dir=temp_root()))
        self._zk = ZooKeeperProcess(self._root / "data")
        try:
            self._zk.start(timeout=timeout, wait=wait)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ready(self, timeout: float = 60.0) -> None:
        self._zk.wait_ready(timeout)

    @property
    def connect(self) -> str:
        return str(self._zk.connect)

    @property
    def log_dir(self) -> Path:
        """A directory that lives as long as this ZooKeeper (its log is there)."""
        assert self._root is not None
        return self._root

    def stop(self) -> None:
        if self._zk is not None:
            self._zk.stop()
            self._zk = None
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None


class EmbeddedCluster:
    """`brokers` brokers (node ids 1..N) and one ZooKeeper node, all on loopback."""

    def __init__(self, brokers: int = 3, config: Mapping[str, ConfigValue] | None = None,
                 *, zookeeper_connect: str | None = None, zygote: Zygote | None = None) -> None:
        """`zookeeper_connect` and `zygote` given are shared with other clusters (the
        pytest plugin keeps one of each per session); otherwise the cluster starts its
        own and stops them with itself."""
        if brokers < 1:
            raise TestkitError(f"a cluster needs at least one broker, not {brokers}")
        rf = str(min(3, brokers))
        defaults = {**CLUSTER_DEFAULTS, "offsets.topic.replication.factor": rf,
                    "transaction.state.log.replication.factor": rf,
                    "default.replication.factor": rf}
        self.properties = broker_properties(config, defaults)
        self.size = brokers
        self._zk_connect = zookeeper_connect
        self._zk: Any = None
        self._zygote: Zygote | None = zygote
        self._own_zygote = zygote is None
        self._root: Path | None = None
        self.brokers: dict[int, ChildBroker] = {}
        self.ports: dict[int, int] = {}
        self.started_in = ""

    # ---- lifecycle ------------------------------------------------------------------

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return any(b.running for b in self.brokers.values())

    def start(self, timeout: float = 60.0) -> EmbeddedCluster:
        if self._root is not None:
            raise TestkitError("the cluster is already started")
        self._root = Path(tempfile.mkdtemp(prefix="odradek-cluster-", dir=temp_root()))
        self.started_in = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
        _live.add(self)
        try:
            if self._zk_connect is None:
                self._zk = SharedZooKeeper().start(wait=False)
                connect = self._zk.connect
            else:  # a ZooKeeper shared with other clusters: a chroot of our own
                connect = f"{self._zk_connect}/{self._root.name}"
            if self._own_zygote:  # imports the broker once, while ZooKeeper starts
                self._zygote = Zygote(self._root / "zygote.log")
            for node_id in range(1, self.size + 1):
                child = ChildBroker(self._broker_props(node_id, connect, 0),
                                    self._root / f"broker{node_id}" / "data",
                                    self._root / f"broker{node_id}.log", self._zygote)
                child.spawn()
                self.brokers[node_id] = child
            if self._zk is not None:
                self._zk.wait_ready(timeout)
            for child in self.brokers.values():
                child.send("start", properties=child.properties)
            for node_id, child in self.brokers.items():
                self.ports[node_id] = int(child.receive("start", timeout)["port"])
                child.properties["listeners"] = f"PLAINTEXT://127.0.0.1:{self.ports[node_id]}"
            self.wait_for(self._formed, timeout, "every broker to see the whole cluster")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every broker and ZooKeeper, and remove the cluster's files."""
        _live.discard(self)
        for child in self.brokers.values():
            with contextlib.suppress(Exception):
                child.stop()
        if self._zygote is not None and self._own_zygote:
            self._zygote.stop()
            self._zygote = None
        if self._zk is not None:
            self._zk.stop()
            self._zk = None
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def _broker_props(self, node_id: int, connect: str, port: int) -> dict[str, str]:
        assert self._root is not None
        return {**self.properties, "node.id": str(node_id), "zookeeper.connect": connect,
                "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "log.dirs": str(self._root / f"broker{node_id}" / "data")}

    # ---- what tests use ---------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's address: clients find the live ones."""
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    @property
    def zookeeper_connect(self) -> str:
        return str(next(iter(self.brokers.values())).properties["zookeeper.connect"])

    def _child(self, node_id: int) -> ChildBroker:
        try:
            return self.brokers[node_id]
        except KeyError:
            raise TestkitError(f"no broker {node_id} in this cluster "
                               f"(brokers {', '.join(map(str, self.brokers))})") from None

    def faults(self, node_id: int) -> RemoteFaults:
        """Injected faults of one broker."""
        return self._child(node_id).faults

    def alive(self) -> list[int]:
        """Brokers running and not paused."""
        return [i for i, c in self.brokers.items() if c.running and not c.paused]

    def kill(self, node_id: int) -> None:
        """SIGKILL one broker: its session lingers until zookeeper.session.timeout.ms."""
        self._child(node_id).kill()

    def restart(self, node_id: int, timeout: float = 60.0) -> None:
        """Start a broker again (after a clean stop if it runs), same port and data."""
        child = self._child(node_id)
        if child.running:
            child.stop()
        child.start(timeout)
        self.wait_for(lambda: node_id in self._image(self.alive()[0])["brokers"], timeout,
                      f"broker {node_id} to rejoin")

    def pause(self, node_id: int) -> None:
        """Freeze a broker (SIGSTOP), as a stalled process or a long GC pause."""
        self._child(node_id).pause()

    def resume(self, node_id: int) -> None:
        self._child(node_id).resume()

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None,
                     config: Mapping[str, ConfigValue] | None = None,
                     timeout: float = 30.0) -> None:
        """Create a topic; returns once every live broker knows each partition's leader
        and the leaders serve them."""
        rf = replication_factor or min(3, self.size)
        configs = {k: str(v) for k, v in (config or {}).items()}
        self._child(self._any_alive()).request("create_topic", name=name,
                                               partitions=partitions,
                                               replication_factor=rf, config=configs)
        for p in range(partitions):
            self.wait_for_leader(name, p, timeout=timeout)

    def delete_topic(self, name: str) -> None:
        self._child(self._any_alive()).request("delete_topic", name=name)

    def leader(self, topic: str, partition: int = 0) -> int:
        """The partition's leader as the live brokers' metadata says (-1: none)."""
        state = self._image(self._any_alive(), topic, partition)["partitions"].get(
            f"{topic}/{partition}")
        if state is None:
            raise TestkitError(f"no partition {topic}/{partition} in the cluster")
        return int(state["leader"])

    def isr(self, topic: str, partition: int = 0, node_id: int | None = None) -> list[int]:
        """The partition's ISR as a live broker's metadata says (`node_id`: that one's;
        ask the leader to see its own ISR changes first)."""
        seen_by = self._any_alive() if node_id is None else node_id
        state = self._image(seen_by, topic, partition)["partitions"].get(
            f"{topic}/{partition}")
        if state is None:
            raise TestkitError(f"no partition {topic}/{partition} in the cluster")
        return [int(i) for i in state["isr"]]

    def wait_for_leader(self, topic: str, partition: int = 0, not_on: int | None = None,
                        timeout: float = 30.0) -> int:
        """Wait until every live broker agrees on a live leader (other than `not_on`)
        and that leader hosts the partition; returns the leader."""
        key = f"{topic}/{partition}"

        def agreed() -> int | None:
            alive = self.alive()
            leaders = set()
            for node_id in alive:
                state = self._image(node_id, topic, partition)["partitions"].get(key)
                if state is None:
                    return None
                leaders.add(int(state["leader"]))
            if len(leaders) != 1:
                return None
            leader = leaders.pop()
            if leader not in alive or leader == not_on:
                return None
            return leader if key in self._image(leader, topic, partition)["hosted"] else None

        return self.wait_for(agreed, timeout, f"a leader of {key}")

    def wait_for(self, predicate: Callable[[], T | None], timeout: float = 30.0,
                 what: str = "") -> T:
        """Poll `predicate` until it returns something truthy; errors count as not yet."""
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while True:
            try:
                value = predicate()
                if value:
                    return value
            except TestkitError as e:
                last = e
            if time.monotonic() > deadline:
                raise TestkitError(f"timed out after {timeout}s waiting for "
                                   f"{what or predicate}" + (f": {last}" if last else ""))
            time.sleep(0.05)

    def _any_alive(self) -> int:
        alive = self.alive()
        if not alive:
            raise TestkitError("no broker of the cluster is running")
        return alive[0]

    def _image(self, node_id: int, topic: str | None = None, partition: int = 0
               ) -> dict[str, Any]:
        """A broker's image summary (`topic`: of that one partition only)."""
        if topic is None:
            return self._child(node_id).request("image", timeout=10)
        return self._child(node_id).request("image", timeout=10,
                                            partition=[topic, partition])

    def _formed(self) -> bool:
        want = set(self.alive())
        for node_id in want:
            image = self._image(node_id)
            if set(image["brokers"]) != want or image["controller"] not in want:
                return False
        return True

    def __repr__(self) -> str:
        return f"<EmbeddedCluster {self.size} brokers on {self.bootstrap_servers or '-'}>"
