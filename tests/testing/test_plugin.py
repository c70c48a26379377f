"""The pytest plugin as a user meets it: a throw-away project whose test files only use
the fixtures installing odradek provides (pytester runs them in a child pytest)."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

USER_SUITE = Path(__file__).with_name("user_suite.py")


@pytest.fixture
def isolated(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> str:
    """A temp dir of the run's own and a mark in its environment, to find what it leaves."""
    mark = uuid.uuid4().hex
    tmp = pytester.path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setenv("ODRADEK_TEST_TMPDIR", str(tmp))
    monkeypatch.setenv("ODRADEK_TESTKIT_RUN", mark)
    return mark


def processes_marked(mark: str) -> list[int]:
    """Processes (brokers, ZooKeeper) a run started that are still alive."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"ODRADEK_TESTKIT_RUN={mark}".encode() in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def assert_nothing_left(pytester: pytest.Pytester, mark: str) -> None:
    assert processes_marked(mark) == []
    assert sorted(p.name for p in (pytester.path / "tmp").iterdir()
                  if p.name.startswith("odradek")) == []
    ports = pytester.path / "ports.txt"
    for line in ports.read_text().split() if ports.exists() else []:
        with socket.socket() as s:  # the broker's port is free again
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", int(line)))


CONFIG_SUITE = """
        import pytest
        from confluent_kafka.admin import AdminClient, ConfigResource

        @pytest.fixture
        def odradek_config():
            return {"num.partitions": 4}

        def partitions(broker, topic):
            from confluent_kafka import Producer
            p = Producer({"bootstrap.servers": broker.bootstrap_servers})
            p.produce(topic, b"x")
            p.flush(10)
            md = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(topic)
            return len(md.topics[topic].partitions)

        def test_module_override(odradek_broker_fresh):
            assert partitions(odradek_broker_fresh, "a") == 4

        @pytest.mark.odradek_config({"num.partitions": 2})
        def test_marker_wins(odradek_broker_fresh):
            assert partitions(odradek_broker_fresh, "b") == 2

        def test_session_broker_from_ini(odradek_broker):
            assert partitions(odradek_broker, "c") == 5
        """


def test_a_users_suite_uses_the_three_fixtures_with_three_clients(
        pytester: pytest.Pytester, isolated: str) -> None:
    """With the broker properties per module, per test (marker) and per session (ini)."""
    pytester.makepyfile(test_app=USER_SUITE.read_text(), test_config=CONFIG_SUITE)
    pytester.makeini("[pytest]\nodradek_broker_config =\n    num.partitions=5\n")
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", timeout=240)
    result.assert_outcomes(passed=8)
    assert_nothing_left(pytester, isolated)


def test_a_broker_a_test_never_stops_fails_the_run_naming_the_test(
        pytester: pytest.Pytester, isolated: str) -> None:
    pytester.makepyfile(test_leaky="""
        from odradek.testing import EmbeddedBroker

        def remember(broker):
            with open("ports.txt", "a") as f:
                f.write(f"{broker.port}\\n")

        def test_forgets_its_broker():
            remember(EmbeddedBroker().start())

        def test_forgets_its_broker_process():
            remember(EmbeddedBroker(process=True).start())

        def test_forgets_its_cluster():
            from odradek.testing import EmbeddedCluster

            cluster = EmbeddedCluster(1).start()
            with open("ports.txt", "a") as f:
                f.write(f"{cluster.ports[1]}\\n")
        """)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=3)
    assert result.ret != 0
    result.stdout.fnmatch_lines([
        "odradek: 2 broker(s) and 1 cluster(s) were never stopped (started in "
        "test_leaky.py::test_forgets_its_broker; "
        "test_leaky.py::test_forgets_its_broker_process; "
        "test_leaky.py::test_forgets_its_cluster); stopped them now"])
    assert_nothing_left(pytester, isolated)


@pytest.mark.slow  # three interpreters importing odradek: ~35 s on a busy 2-core machine
def test_xdist_gives_each_worker_its_own_broker(pytester: pytest.Pytester,
                                                 isolated: str) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(test_workers="""
        import os

        def test_one(odradek_broker):
            with open(f"worker-{os.environ['PYTEST_XDIST_WORKER']}", "w") as f:
                f.write(odradek_broker.bootstrap_servers)

        def test_two(odradek_broker):
            test_one(odradek_broker)
        """)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "-n", "2",
                                           timeout=120)
    result.assert_outcomes(passed=2)
    addresses = {p.read_text() for p in pytester.path.glob("worker-*")}
    assert len(addresses) == len(list(pytester.path.glob("worker-*")))
    assert_nothing_left(pytester, isolated)


def test_the_plugin_is_registered_by_the_package() -> None:
    from importlib.metadata import entry_points

    assert [e.value for e in entry_points(group="pytest11") if e.name == "odradek"] == [
        "odradek.testing.plugin"]
    assert os.environ.get("ODRADEK_TESTKIT_RUN") is None
