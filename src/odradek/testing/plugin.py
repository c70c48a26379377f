"""The pytest plugin installing odradek registers (entry point `pytest11`).

Fixtures:
- `odradek_broker` — one broker for the whole session (one per pytest-xdist worker);
  tests share it, so they use their own topics (`odradek_topic` names one). Its faults
  are cleared after each test.
- `odradek_broker_fresh` — a new, empty broker for one test.
- `odradek_cluster` — three brokers on a local ZooKeeper for one test.
- `odradek_config` — broker properties for the fresh broker and the cluster; override
  it in a module or conftest, or mark a test `@pytest.mark.odradek_config({...})`.
The session broker takes its properties from the ini option `odradek_broker_config`
(lines of `name=value`).

At the end of the session, a broker or cluster some test started and never stopped is
stopped, and the run fails naming the test that started it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from odradek.testing.cluster import EmbeddedCluster
    from odradek.testing.embedded import EmbeddedBroker
    from odradek.testing.zygote import Zygote

_session_broker: list[EmbeddedBroker] = []
_leak_report: list[str] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("odradek_broker_config", "broker properties (name=value lines) of the "
                  "session-wide odradek_broker", type="linelist", default=[])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "odradek_config(properties): broker properties for this test's "
        "odradek_broker_fresh or odradek_cluster, on top of the odradek_config fixture")


@pytest.fixture
def odradek_config() -> dict[str, Any]:
    """Broker properties of `odradek_broker_fresh` and `odradek_cluster`: override it."""
    return {}


def _properties(request: pytest.FixtureRequest, base: dict[str, Any]) -> dict[str, Any]:
    props = dict(base)
    for marker in reversed(list(request.node.iter_markers("odradek_config"))):
        if len(marker.args) != 1 or not isinstance(marker.args[0], dict):
            raise pytest.UsageError("odradek_config takes one dict of broker properties")
        props.update(marker.args[0])
    return props


@pytest.fixture(scope="session")
def odradek_broker(pytestconfig: pytest.Config) -> Iterator[EmbeddedBroker]:
    """One broker shared by the session's tests."""
    from odradek.testing.embedded import EmbeddedBroker

    props: dict[str, str] = {}
    for line in pytestconfig.getini("odradek_broker_config"):
        name, sep, value = str(line).partition("=")
        if not sep:
            raise pytest.UsageError(f"odradek_broker_config: {line!r} is not name=value")
        props[name.strip()] = value.strip()
    broker = EmbeddedBroker(props).start()
    _session_broker.append(broker)
    try:
        yield broker
    finally:
        _session_broker.remove(broker)
        broker.stop()


@pytest.fixture(autouse=True)
def _odradek_clear_faults() -> Iterator[None]:
    """Faults set on the shared broker end with the test that set them."""
    yield
    for broker in _session_broker:
        if broker.running:
            broker.faults.clear()


@pytest.fixture
def odradek_broker_fresh(request: pytest.FixtureRequest,
                         odradek_config: dict[str, Any]) -> Iterator[EmbeddedBroker]:
    """A new, empty broker of this test's own."""
    from odradek.testing.embedded import EmbeddedBroker

    broker = EmbeddedBroker(_properties(request, odradek_config)).start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def _odradek_cluster_base() -> Iterator[tuple[str, Zygote]]:
    """One ZooKeeper (each cluster takes a chroot in it) and one zygote (a process that
    has imported the broker and forks broker processes) for the session's clusters:
    only the first cluster waits for the JVM and the import."""
    from odradek.testing.cluster import SharedZooKeeper
    from odradek.testing.zygote import Zygote

    zookeeper = SharedZooKeeper().start(wait=False)
    zygote: Zygote | None = None
    try:
        zygote = Zygote(zookeeper.log_dir / "zygote.log")
        zookeeper.wait_ready()
        yield zookeeper.connect, zygote
    finally:
        if zygote is not None:
            zygote.stop()
        zookeeper.stop()


@pytest.fixture
def odradek_cluster(request: pytest.FixtureRequest, odradek_config: dict[str, Any],
                    _odradek_cluster_base: tuple[str, Zygote]) -> Iterator[EmbeddedCluster]:
    """Three replicated brokers on a local ZooKeeper, for this test."""
    from odradek.testing.cluster import EmbeddedCluster

    connect, zygote = _odradek_cluster_base
    cluster = EmbeddedCluster(3, _properties(request, odradek_config),
                              zookeeper_connect=connect, zygote=zygote).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def odradek_topic() -> str:
    """A topic name no other test uses."""
    return f"test-{uuid.uuid4().hex[:12]}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    import sys

    if "odradek.testing.embedded" not in sys.modules:
        return  # nothing was started
    from odradek.testing.embedded import running_brokers

    leaked = running_brokers()
    cluster_module = sys.modules.get("odradek.testing.cluster")
    clusters = cluster_module.running_clusters() if cluster_module is not None else []
    if not leaked and not clusters:
        return
    where = sorted({getattr(b, "started_in", None) or "outside a test"
                    for b in [*leaked, *clusters]})
    for thing in [*leaked, *clusters]:
        thing.stop()
    _leak_report.append(
        f"odradek: {len(leaked)} broker(s) and {len(clusters)} cluster(s) were never "
        f"stopped (started in {'; '.join(where)}); stopped them now")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in _leak_report:
        terminalreporter.write_line(line, red=True)
