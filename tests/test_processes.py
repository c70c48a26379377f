"""The test run's own safety net: children of a run that dies without its teardown
(pytest-timeout's os._exit, a killed CI job) do not outlive it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

DYING_RUN = """
import os, subprocess
from tests.processes import reap_on_exit
alone = subprocess.Popen(["sleep", "600"], stdout=subprocess.DEVNULL)
reap_on_exit(alone)
leader = subprocess.Popen(["sh", "-c", "sleep 600 & sleep 600"], start_new_session=True,
                          stdout=subprocess.DEVNULL)
reap_on_exit(leader, group=True)
print(alone.pid, leader.pid, flush=True)
os._exit(1)  # as pytest-timeout ends a hung run: no finally, no atexit
"""


def running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def group_members(pgid: int) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                fields = (p / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append(int(p.name))
    return out


def test_children_of_a_run_that_dies_are_killed() -> None:
    result = subprocess.run([sys.executable, "-c", DYING_RUN], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    alone, leader = map(int, result.stdout.split())
    deadline = time.monotonic() + 30
    while running(alone) or group_members(leader):
        assert time.monotonic() < deadline, "the dead run's children are still running"
        time.sleep(0.1)
