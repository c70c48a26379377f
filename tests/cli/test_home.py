"""The data home: every command finds the same root, read-only commands create nothing,
and a home that cannot be used is refused in one line before anything is made."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.home import MARKER, Home
from tests.conftest import free_port

ODRADEK = [sys.executable, "-m", "odradek"]
# variables of the person running the tests that would point the commands elsewhere
FOREIGN_ENV = ("ODRADEK_HOME", "XDG_DATA_HOME", "ODRADEK_LAKE_DIR", "ODRADEK_LOG_DIRS",
               "ODRADEK_LISTENERS")


def user_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV}
    return {**env, "HOME": str(home), "PYTHONUNBUFFERED": "1", **extra}


def odradek(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ODRADEK, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


READ_ONLY = [["lake", "tables"], ["lake", "describe", "iot.events"],
             ["lake", "history", "iot.events"], ["lake", "search", "temperature"],
             ["lake", "maintain", "iot.events"], ["pipeline", "state", "device-stats"]]


@pytest.mark.parametrize("args", READ_ONLY, ids=lambda a: " ".join(a))
def test_a_read_only_command_pointed_at_nothing_fails_in_one_line_and_creates_nothing(
        tmp_path: Path, args: list[str]) -> None:
    home, cwd = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    cwd.mkdir()
    before = tree(tmp_path)
    default_root = home / ".local" / "share" / "odradek"
    for extra, looked_in in (([], default_root), (["--data-dir", str(tmp_path / "elsewhere")],
                                                   tmp_path / "elsewhere")):
        result = odradek([*args, *extra], cwd, user_env(home))
        assert result.returncode != 0
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("error: no ") and str(looked_in) in lines[0], lines[0]
        assert "--data-dir" in lines[0]  # how to point elsewhere
        assert tree(tmp_path) == before, "a read-only command left files behind"


def test_a_data_dir_that_is_a_file_is_refused_before_anything_starts(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    for args in (["up"], ["broker"], ["lake", "tables"]):
        result = odradek([*args, "--data-dir", str(a_file)], tmp_path, user_env(home))
        assert result.returncode == 1
        assert result.stderr.strip() == (f"error: data home {a_file} is a file, not a folder: "
                                          "point --data-dir (or ODRADEK_HOME) at a folder")
    assert a_file.read_text() == "mine" and not (home / ".local").exists()


def test_a_home_holding_another_programs_files_is_refused_and_left_alone(tmp_path: Path) -> None:
    theirs = tmp_path / "photos"
    theirs.mkdir()
    for name in ("a.jpg", "b.jpg"):
        (theirs / name).write_text("x")
    result = odradek(["up"], tmp_path, user_env(tmp_path, ODRADEK_HOME=str(theirs)))
    assert result.returncode == 1
    assert "holds files that are not odradek's (a.jpg, b.jpg)" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in theirs.iterdir()) == ["a.jpg", "b.jpg"]


def test_a_home_that_cannot_be_written_is_refused(tmp_path: Path) -> None:
    if os.geteuid() == 0:  # root writes anywhere a mode allows nothing: sysfs refuses it
        target = Path("/sys/odradek-home-test")
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        target = locked / "odradek"
    result = odradek(["broker", "--data-dir", str(target)], tmp_path, user_env(tmp_path))
    assert result.returncode == 1
    assert str(target) in result.stderr and "you can write" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not target.exists()


def test_up_with_its_port_taken_says_so_and_makes_nothing(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        result = odradek(["up"], tmp_path, user_env(
            tmp_path, ODRADEK_LISTENERS=f"PLAINTEXT://localhost:{port}"))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: something already listens on localhost:{port}; stop it or set "
        "ODRADEK_LISTENERS=PLAINTEXT://localhost:PORT to use another port"]
    assert not (tmp_path / ".local").exists()


def test_every_command_shares_one_layout_below_the_home(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from odradek.server.config import BrokerConfig

    monkeypatch.setenv("ODRADEK_HOME", str(tmp_path / "h"))
    monkeypatch.delenv("ODRADEK_LOG_DIRS", raising=False)
    home = Home.at()
    assert home.root == tmp_path / "h" and home.is_default and home.option() == ""
    assert BrokerConfig.load(environ={}).log_dirs == [tmp_path / "h" / "data"]
    assert (home.catalog_db, home.warehouse, home.checkpoint("iot.events")) == (
        tmp_path / "h" / "lake" / "catalog.db", tmp_path / "h" / "lake" / "warehouse",
        tmp_path / "h" / "checkpoints" / "iot.events")
    other = Home.at(tmp_path / "with space")
    assert other.option() == f" --data-dir '{tmp_path / 'with space'}'"
    other.prepare()
    assert (other.root / MARKER).is_file()
    other.check()  # its own marker makes it odradek's, whatever else is put there


def test_the_command_an_error_suggests_works_when_pasted(tmp_path: Path) -> None:
    """A lake from before the data home (odradek up's pipeline/lake, or a lake folder given
    as --data-dir): the error names the --catalog-uri that reads it, and that works."""
    pytest.importorskip("pyiceberg")
    import re
    import shlex

    from odradek.pipeline.lake_catalog import LakeConfig, ensure_table, open_catalog

    home = tmp_path / "home"
    old_root = home / ".local" / "share" / "odradek"
    ensure_table(open_catalog(LakeConfig.local(old_root / "pipeline" / "lake")), "iot.events")
    env = user_env(home)
    for args in (["lake", "tables"], ["lake", "tables", "--data-dir",
                                      str(old_root / "pipeline" / "lake")]):
        refused = odradek(args, tmp_path, env)
        assert refused.returncode == 1
        option = re.search(r"(--catalog-uri \S+)$", refused.stderr.strip())
        assert option is not None, refused.stderr
        pasted = odradek(["lake", "tables", *shlex.split(option.group(1))], tmp_path, env)
        assert pasted.returncode == 0, pasted.stderr
        assert "iot.events" in pasted.stdout
