"""CI's run of the scale benchmark (issue 12) at its quick sizes: a real broker grows
from 50 to 200 partitions, is restarted cleanly and after kill -9, and every cost of the
table is measured with its fitted exponent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_scale_bench_quick_measures_every_cost_at_each_size(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.scale", "--quick", "--idle-seconds", "0.5",
         "--workdir", str(tmp_path / "work"), "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=180)
    report = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.returncode == 0, report
    rows = json.loads(out.read_text())["rows"]
    assert [r["size"] for r in rows] == [50, 200], report
    for row in rows:
        for key in ("create_s", "restart_s", "kill9_restart_s", "metadata_ms", "rss_mib",
                    "fds", "produce_rate", "delete_s"):
            assert row[key] > 0, (key, row)
    # the printed table: a row per cost, each with its exponent
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("| clean restart (s) |")]
    assert len(lines) == 1, report
    exponent = lines[0].split("|")[4].strip()
    float(exponent)


@pytest.mark.slow  # three broker starts: about a minute on a loaded machine
def test_scale_bench_groups_and_connections_at_a_small_size(tmp_path: Path) -> None:
    """20 groups join, commit, fetch, list and are served again after a restart; a busy
    client's latency is measured alone and beside 50 idle connections."""
    out = tmp_path / "scale.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.scale", "--groups", "20", "--connections", "50",
         "--workdir", str(tmp_path / "work"), "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=180)
    report = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.returncode == 0, report
    result = json.loads(out.read_text())
    assert result["rows"] == [], report  # no partitions dimension unless asked
    (groups,) = result["groups"]
    assert groups["size"] == 20
    for key in ("join_p99_ms", "commit_p99_ms", "fetch_p99_ms", "list_ms", "load_s"):
        assert groups[key] > 0, (key, groups)
    (conns,) = result["connections"]
    assert conns["size"] == 50 and conns["alone_p99_ms"] > 0 and conns["busy_p99_ms"] > 0
    assert "| groups served after a restart (s) |" in proc.stdout, report
    assert "| p99 ratio (crowded / alone) |" in proc.stdout, report


def test_scale_bench_cluster_dimension_kills_the_controller_and_measures_the_failover(
        tmp_path: Path) -> None:
    """Three brokers on ZooKeeper with 100 partitions: created, seen by every broker, a
    new topic propagated, the controller SIGKILLed (another takes over and acts) and
    started again (its image complete)."""
    out = tmp_path / "scale.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.scale", "--cluster", "100", "--idle-seconds", "0.5",
         "--workdir", str(tmp_path / "work"), "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240)
    report = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.returncode == 0, report
    result = json.loads(out.read_text())
    assert result["rows"] == [], report
    (row,) = result["cluster"]
    assert row["size"] == 100
    for key in ("create_s", "complete_s", "propagate_ms", "metadata_ms", "rss_mib",
                "elected_s", "failover_s", "rejoin_s"):
        assert row[key] > 0, (key, row)
    assert row["zk_watches"] >= 100, row  # every broker watches the partitions' states
    # a new controller is named before it acts on a topic created afterwards
    assert row["elected_s"] < row["failover_s"], row
    assert "| … → a topic created then is led (s) |" in proc.stdout, report
