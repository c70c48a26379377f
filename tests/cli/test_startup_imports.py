"""What the command imports before it does anything: every second of it is a second of
each broker restart and each tool call."""

from __future__ import annotations

import os
import subprocess
import sys


def test_the_command_does_not_import_the_test_libraries() -> None:
    """kio registers Hypothesis strategies when Hypothesis is installed; importing it
    pulled in pytest and trio and cost 1 to 2 s of every start."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "odradek", "--help"],
                         capture_output=True, text=True, env=env, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines()
                if line.startswith("import time:")}
    assert "odradek.cli.main" in imported
    # a failed import shows its name too, so look at the packages' insides
    assert not {m for m in imported if m.startswith(("hypothesis.", "_pytest", "trio."))
                and m != "hypothesis.strategies"}
