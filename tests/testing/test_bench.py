"""bench/testkit.py still runs and reports every measurement (a smoke run: few
repetitions, no cluster; the full run is `python bench/testkit.py`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # a child pytest of 20 tests and a few dozen brokers: ~20 s here
def test_the_testkit_benchmark_measures_every_goal(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "testkit.py"), "--quick",
                           "--no-cluster", "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    data = json.loads((tmp_path / "testkit.json").read_text())
    rows = {row["what"]: row for row in data["table"]}
    assert any(what.startswith("fresh EmbeddedBroker ready") for what in rows), proc.stderr
    assert all(row["odradek_ms"] > 0 for row in rows.values())
    first = next(r for w, r in rows.items() if w.startswith("first produce"))
    assert first["mock_ms"] is not None and first["mock_ms"] > 0
