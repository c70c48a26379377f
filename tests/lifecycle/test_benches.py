"""The lifecycle benchmarks still run (tiny sizes): cleaner throughput, recovery time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, *args: str, tmp: Path) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args,
                           "--workdir", str(tmp)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_cleaner_bench_prints_its_throughput(tmp_path: Path) -> None:
    out = _run("cleaner_bench.py", "--size-mb", "2", "--keys", "500", tmp=tmp_path)
    assert "MB/s of log cleaned" in out and "500 records kept" in out


def test_recovery_bench_prints_seconds_per_gb(tmp_path: Path) -> None:
    out = _run("recovery_bench.py", "--size-mb", "4", "--segment-mb", "1", tmp=tmp_path)
    assert out.count("s/GB") == 3
