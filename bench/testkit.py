"""The benchmark of issue 20: odradek.testing next to librdkafka's mock cluster.

    python bench/testkit.py [--quick] [--no-cluster] [--out DIR]

Measures, on this machine, in one run:
- import of odradek.testing and the broker (a fresh interpreter);
- a fresh EmbeddedBroker ready — answering ApiVersions on a new connection — after the
  first one (median and p90 over N);
- the `odradek_broker_fresh` fixture: set-up time per test, and the whole fixture
  overhead (set-up + teardown) of 200 tests that each get a fresh broker, measured by
  pytest itself in a child run;
- a first produce acknowledged after a fresh broker is asked for (start + a
  confluent-kafka producer's first delivery), against the same with
  `test.mock.num.brokers=1`;
- EmbeddedCluster(3) ready, and a leader kill under acks=all: from the SIGKILL to the
  first record acknowledged after it (the producer writes all along), against a
  3-broker mock cluster's first produce.
Results: a table on stdout and `testkit.json` in --out (default bench/results/testkit-<time>).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parent.parent

# Goals of issue 20 (seconds): name → (limit, statistic it applies to)
GOALS = {
    "broker_ready": 0.050,
    "fixture_setup": 0.100,
    "first_produce": 0.100,
    "cluster_ready": 3.0,
    "leader_kill_recovery": 5.0,
    "fixture_overhead_200": 60.0,
}


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def median(values: list[float]) -> float:
    return statistics.median(values)


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


# ---- single measurements ------------------------------------------------------------------

def measure_import() -> dict[str, float]:
    code = ("import time; t = time.perf_counter(); import odradek.testing; a = time.perf_counter();"
            " import odradek.server.broker; b = time.perf_counter();"
            " print(a - t, b - t)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    return {"import_testing": float(out[0]), "import_broker": float(out[1])}


def api_versions_roundtrip(port: int) -> None:
    """ApiVersions v0 on a new connection: the broker answers, so it is ready."""
    body = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _recv(s, 4))[0]
        data = _recv(s, size)
    if struct.unpack(">ih", data[:6])[1] != 0:
        raise RuntimeError("ApiVersions answered an error")


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise RuntimeError("connection closed")
        buf += chunk
    return buf


def measure_broker_ready(n: int) -> list[float]:
    from odradek.testing import EmbeddedBroker

    EmbeddedBroker().start().stop()  # the first pays for lazy imports
    times = []
    for _ in range(n):
        started = time.perf_counter()
        broker = EmbeddedBroker().start()
        api_versions_roundtrip(broker.port)
        times.append(time.perf_counter() - started)
        broker.stop()
    return times


def _first_delivery(config: dict[str, Any], topic: str) -> float:
    """Seconds from now to the first delivery report of a new producer."""
    from confluent_kafka import Producer

    done = threading.Event()
    errors: list[Any] = []
    producer = Producer({**config, "linger.ms": 0, "log_level": 0})
    producer.produce(topic, b"first", on_delivery=lambda err, _m: (errors.append(err),
                                                                   done.set()))
    while not done.is_set():
        producer.poll(0.001)
    if errors[0] is not None:
        raise RuntimeError(f"first produce failed: {errors[0]}")
    producer.flush(5)
    return time.perf_counter()


def measure_first_produce(n: int) -> list[float]:
    from odradek.testing import EmbeddedBroker

    times = []
    for i in range(n):
        started = time.perf_counter()
        broker = EmbeddedBroker().start()
        end = _first_delivery({"bootstrap.servers": broker.bootstrap_servers}, f"t{i}")
        times.append(end - started)
        broker.stop()
    return times


def measure_mock_first_produce(n: int, brokers: int = 1) -> list[float]:
    times = []
    for i in range(n):
        started = time.perf_counter()
        end = _first_delivery({"test.mock.num.brokers": brokers}, f"t{i}")
        times.append(end - started)
    return times


def measure_fixture(tests: int) -> dict[str, Any]:
    """A child pytest run of `tests` tests that each take odradek_broker_fresh; pytest's
    own set-up and teardown durations of each test are the fixture's cost."""
    with tempfile.TemporaryDirectory(prefix="testkit-bench-") as tmp:
        Path(tmp, "test_many.py").write_text(textwrap.dedent(f"""
            import pytest

            @pytest.mark.parametrize("i", range({tests}))
            def test_fresh(odradek_broker_fresh, i):
                assert odradek_broker_fresh.running
            """))
        Path(tmp, "conftest.py").write_text(textwrap.dedent("""
            import json

            durations = {"setup": [], "teardown": []}

            def pytest_runtest_logreport(report):
                if report.when in durations:
                    durations[report.when].append(report.duration)

            def pytest_sessionfinish(session):
                with open("durations.json", "w") as f:
                    json.dump(durations, f)
            """))
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-p", "no:randomly", "test_many.py"], cwd=tmp,
                              capture_output=True, text=True)
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            raise RuntimeError(f"fixture run failed:\n{proc.stdout[-2000:]}")
        durations = json.loads(Path(tmp, "durations.json").read_text())
    setup, teardown = durations["setup"], durations["teardown"]
    # the first test also pays for importing the broker: reported apart
    return {"setup": setup[1:], "first_setup": setup[0], "teardown": teardown,
            "overhead_total": sum(setup) + sum(teardown), "wall": wall, "tests": tests}


def measure_cluster(rounds: int) -> dict[str, list[float]]:
    from confluent_kafka import Producer

    from odradek.testing import EmbeddedCluster
    from odradek.testing.cluster import SharedZooKeeper
    from odradek.testing.zygote import Zygote

    ready, ready_shared, recovery = [], [], []
    zookeeper = SharedZooKeeper().start()
    zygote = Zygote(zookeeper.log_dir / "zygote.log")
    try:
        for _ in range(rounds + 1):  # as the odradek_cluster fixture after its first
            started = time.perf_counter()
            EmbeddedCluster(3, zookeeper_connect=zookeeper.connect, zygote=zygote).start().stop()
            ready_shared.append(time.perf_counter() - started)
    finally:
        zygote.stop()
        zookeeper.stop()
    ready_shared = ready_shared[1:]
    for r in range(rounds):
        started = time.perf_counter()
        cluster = EmbeddedCluster(3).start()
        ready.append(time.perf_counter() - started)
        try:
            topic = f"bench{r}"
            cluster.create_topic(topic, partitions=1, replication_factor=3)
            producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                 "acks": "all", "enable.idempotence": True, "linger.ms": 0,
                                 "log_level": 0})
            acked: list[float] = []

            def report(err: Any, _msg: Any, acked: list[float] = acked) -> None:
                if err is None:
                    acked.append(time.perf_counter())

            for _ in range(20):
                producer.produce(topic, b"before", on_delivery=report)
            producer.flush(30)
            killed = time.perf_counter()
            cluster.kill(cluster.leader(topic, 0))
            deadline = killed + 60
            while time.perf_counter() < deadline and not any(t > killed for t in acked):
                producer.produce(topic, b"during", on_delivery=report)
                producer.poll(0.01)
            producer.flush(30)
            after = [t for t in acked if t > killed]
            recovery.append((min(after) if after else float("inf")) - killed)
        finally:
            cluster.stop()
    return {"ready": ready, "ready_shared_zookeeper": ready_shared, "recovery": recovery}


# ---- the run ------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions (CI smoke)")
    parser.add_argument("--no-cluster", action="store_true", help="skip EmbeddedCluster")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    n = 5 if args.quick else 30
    tests = 20 if args.quick else 200
    rounds = 1 if args.quick else 3

    results: dict[str, Any] = {"quick": args.quick}
    _log("import …")
    results.update(measure_import())
    _log("fresh brokers …")
    results["broker_ready"] = measure_broker_ready(n)
    results["first_produce"] = measure_first_produce(n)
    results["mock_first_produce"] = measure_mock_first_produce(n)
    _log(f"{tests} tests with odradek_broker_fresh …")
    results["fixture"] = measure_fixture(tests)
    if not args.no_cluster:
        _log("clusters …")
        results["cluster"] = measure_cluster(rounds)
        results["mock3_first_produce"] = measure_mock_first_produce(n, brokers=3)

    rows = table(results)
    print(render(rows))
    out = args.out or ROOT / "bench" / "results" / time.strftime("testkit-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    (out / "testkit.json").write_text(json.dumps({"results": results, "table": rows},
                                                 indent=1))
    (out / "table.md").write_text(render(rows) + "\n")
    _log(f"results in {out}")
    return 0 if all(r["met"] is not False for r in rows) else 1


def table(results: dict[str, Any]) -> list[dict[str, Any]]:
    def row(what: str, value: float, goal: str | None, mock: float | None,
            note: str = "") -> dict[str, Any]:
        limit = GOALS.get(goal) if goal else None
        return {"what": what, "odradek_ms": round(value * 1000, 1),
                "mock_ms": round(mock * 1000, 1) if mock is not None else None,
                "goal_ms": round(limit * 1000) if limit is not None else None,
                "met": (value < limit) if limit is not None else None, "note": note}

    fixture = results["fixture"]
    rows = [
        row("import odradek.testing", results["import_testing"], None, None),
        row("import the broker (odradek.server.broker)", results["import_broker"], None, None),
        row("fresh EmbeddedBroker ready (ApiVersions), median", median(results["broker_ready"]),
            "broker_ready", None, f"p90 {p90(results['broker_ready']) * 1000:.1f} ms"),
        row("odradek_broker_fresh set-up, median", median(fixture["setup"]), "fixture_setup",
            None, f"first test {fixture['first_setup'] * 1000:.0f} ms (imports)"),
        row("first produce acknowledged after start, median", median(results["first_produce"]),
            "first_produce", median(results["mock_first_produce"]),
            "mock: test.mock.num.brokers=1"),
        row(f"{fixture['tests']} tests with a fresh broker: fixture set-up + teardown",
            fixture["overhead_total"], "fixture_overhead_200" if fixture["tests"] >= 200
            else None, None, f"whole run {fixture['wall']:.1f} s"),
    ]
    if "cluster" in results:
        c = results["cluster"]
        rows.append(row("EmbeddedCluster(3) ready, median", median(c["ready"]), "cluster_ready",
                        median(results["mock3_first_produce"]),
                        "mock: first produce, test.mock.num.brokers=3"))
        rows.append(row("EmbeddedCluster(3) ready, the session's ZooKeeper and zygote, median",
                        median(c["ready_shared_zookeeper"]), "cluster_ready", None,
                        "as odradek_cluster after the first"))
        rows.append(row("leader kill under acks=all → next ack, median", median(c["recovery"]),
                        "leader_kill_recovery", None, "mock: no broker kill"))
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    lines = ["| measurement | odradek (ms) | librdkafka mock (ms) | goal (ms) | met | note |",
             "|---|---:|---:|---:|---|---|"]
    for r in rows:
        met = {True: "yes", False: "NO", None: ""}[r["met"]]
        lines.append(f"| {r['what']} | {r['odradek_ms']} | {r['mock_ms'] or ''} | "
                     f"{r['goal_ms'] or ''} | {met} | {r['note']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
