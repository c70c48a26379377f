"""CI's run of the scale benchmark (issue 12) at its quick sizes: a real broker grows
from 50 to 200 partitions, is restarted cleanly and after kill -9, and every cost of the
table is measured with its fitted exponent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
