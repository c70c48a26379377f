"""CI's smoke run of the benchmark (issue 7): tiny sizes, one round, odradek only.

The full benchmark is not part of the test run; this checks that `python bench/run.py`
still starts a broker, drives every workload and prints a table with a number in each
odradek cell. It needs no network: the peer is never installed here, and the C client is
used only when it can be built from what is already on the machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "bench" / "run.py"


def _bench(tmp_path: Path, client: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--rounds", "1", "--brokers", "odradek",
         "--client", client, "--out", str(out), "--workdir", str(tmp_path / "work")],
        cwd=ROOT, capture_output=True, text=True, timeout=240)
    if client == "c" and "cannot build rdkafka_performance" in proc.stderr:
        pytest.skip(proc.stderr.strip().splitlines()[-1])
    assert (out / "results.json").exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads((out / "results.json").read_text())


def _assert_every_workload_measured(proc: subprocess.CompletedProcess[str], data: dict) -> None:
    report = proc.stdout[-4000:] + proc.stderr[-4000:]
    failed = [f"{s['workload']}: {s['error']}" for s in data["samples"] if s["error"]]
    assert not failed, "\n".join(failed) + "\n" + report
    measured = {s["workload"] for s in data["samples"] if s["metrics"]}
    assert measured == set(data["workloads"]), report
    for row in data["table"]:
        value = row["odradek"].replace(",", "")
        assert value not in ("FAIL", "—"), row
        float(value)  # a number in every odradek cell
    assert "medians of 1 round" in proc.stdout
    assert proc.returncode == 0, report


def test_bench_quick_run_measures_every_workload_with_odradek_perf(tmp_path: Path) -> None:
    proc, data = _bench(tmp_path, "py")
    _assert_every_workload_measured(proc, data)
    assert data["machine"]["client"] == "py"


def test_bench_quick_run_with_the_c_client_when_it_can_be_built(tmp_path: Path) -> None:
    proc, data = _bench(tmp_path, "c")
    _assert_every_workload_measured(proc, data)
    assert data["machine"]["client"] == "c"
