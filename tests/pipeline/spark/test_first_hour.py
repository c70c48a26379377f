"""A new user's first hour: `odradek up` with its output in a file on a fresh machine,
then the commands it prints, and `odradek lake tables` with no options."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from tests.cli.test_home import odradek, user_env
from tests.conftest import free_port_run
from tests.processes import started, wait_for_output

pytestmark = pytest.mark.timeout(900)

PROGRESS = re.compile(r"(?m)^odradek up \d+s: fleet (\d+) sent, .*; lake (\d+) rows in "
                      r"iot\.events, .* compactions$")
STOPPED = re.compile(r"(?m)^stopped: \d+ sent; (\d+) rows in (\d+) files in iot\.events, \d+ "
                     r"quarantined; look around: (odradek .+)$")


def test_up_in_a_file_then_its_hint_and_lake_tables_find_the_lake(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    port = free_port_run(1)
    env = user_env(home, ODRADEK_LISTENERS=f"PLAINTEXT://localhost:{port}")
    log = tmp_path / "up.log"
    cmd = [sys.executable, "-m", "odradek", "up", "--duration", "20", "--rate", "100",
           "--devices", "6", "--progress-interval", "2", "--maintain-every", "3"]
    with started(cmd, log, sigint_ignored=True, env=env) as proc:
        first = wait_for_output(proc, log, PROGRESS.pattern, timeout=600)
        # a steady interval: another line follows while it runs
        wait_for_output(proc, log, rf"(?s){re.escape(first.group(0))}.*\nodradek up \d+s:",
                        timeout=120)
        assert proc.wait(600) == 0, log.read_text()[-3000:]
    text = log.read_text()
    assert len(PROGRESS.findall(text)) >= 2
    assert "Setting default log level" not in text and " WARN " not in text, text[:3000]
    stopped = STOPPED.search(text)
    assert stopped is not None, text[-3000:]
    rows, files = int(stopped.group(1)), int(stopped.group(2))
    assert rows > 0 and files > 0
    home_line = re.search(r"data home (\S+) \(", text)
    assert home_line is not None and home_line.group(1) == str(
        home / ".local" / "share" / "odradek")

    hint = shlex.split(stopped.group(3))
    assert hint[:2] == ["odradek", "lake"]
    described = odradek(hint[1:], work, env)
    assert described.returncode == 0, described.stderr
    assert f"{rows} rows in {files} files" in described.stdout

    listed = odradek(["lake", "tables"], work, env)
    assert listed.returncode == 0, listed.stderr
    assert "iot.events" in listed.stdout
    as_json = odradek(["lake", "maintain", "iot.events", "--json"], work, env)
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["rows"] == rows

    # device-stats's hint names its checkpoint in the home; a busy machine may have ended
    # the run before its first batch, and then the answer is the one-line refusal
    state = odradek(["pipeline", "state", "device-stats", "--limit", "1"], work, env)
    checkpoint = home / ".local" / "share" / "odradek" / "checkpoints" / "device-stats"
    if (checkpoint / "state").is_dir():
        assert state.returncode == 0, state.stderr
        assert "operator 0" in state.stdout
    else:
        assert state.returncode == 1
        assert state.stderr.strip() == (f"error: no streaming state at {checkpoint / 'state'}"
                                        ": name a stateful query's checkpoint folder (odradek"
                                        " up keeps device-stats in the data home's "
                                        "checkpoints/)")
    assert list(work.iterdir()) == []  # nothing left where the user stands

    nothing = odradek(["lake", "tables", "--data-dir", str(tmp_path / "typo")], work, env)
    assert nothing.returncode == 1
    assert str(tmp_path / "typo" / "lake" / "catalog.db") in nothing.stderr
    assert not (tmp_path / "typo").exists()


def test_up_prints_only_hints_that_work() -> None:
    """Every command a tool prints for the user to paste is one of those run above."""
    src = Path(__file__).resolve().parents[3] / "src" / "odradek"
    printed = set()
    for path in [src / "cli" / "up.py", src / "pipeline" / "up.py"]:
        printed |= set(re.findall(r"odradek (?:lake|pipeline) [a-z-]+", path.read_text()))
    assert printed <= {"odradek lake describe", "odradek lake tables"}, printed
