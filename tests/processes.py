"""Child processes in tests: started in a process group of their own and stopped with all
their descendants whatever happens, and waited for by state, never by time.

    with started([sys.executable, "-m", "odradek", "cluster", "up", ...], log,
                 sigint_ignored=True) as proc:
        text = wait_for_output(proc, log, r"bootstrap\\.servers=(\\S+)")
        ...
        assert stop(proc, signal.SIGINT) == 0

`sigint_ignored` starts the command as `make test &` would: with SIGINT ignored, a
disposition the child inherits and that Python honours (no KeyboardInterrupt ever).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

# sets SIGINT to ignored, then becomes the command: an ignored signal survives exec
_IGNORE_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                  "os.execvp(sys.argv[1], sys.argv[1:])")


@contextlib.contextmanager
def started(cmd: Sequence[str], log: Path, *, sigint_ignored: bool = False,
            env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """Run `cmd` with its output in `log`; on leaving, SIGKILL its whole process group
    (brokers, ZooKeeper, JVMs it started) if the test did not stop it."""
    argv = [sys.executable, "-c", _IGNORE_SIGINT, *cmd] if sigint_ignored else list(cmd)
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True,
                                env=dict(env or os.environ, PYTHONUNBUFFERED="1"))
    try:
        yield proc
    finally:
        kill_group(proc)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL every process left in `proc`'s group (a no-op when all have exited)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(30)


def group_alive(proc: subprocess.Popen[bytes]) -> bool:
    """Whether any process of `proc`'s group still runs (its children too)."""
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    # the leader may be a zombie we have not reaped yet: it counts as gone
    if proc.poll() is None:
        return True
    return any(_in_group(int(p.name), proc.pid) for p in Path("/proc").iterdir()
               if p.name.isdigit())


def _in_group(pid: int, pgid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat.rpartition(")")[2].split()  # after "pid (comm)": state ppid pgrp …
    return fields[0] != "Z" and int(fields[2]) == pgid


def wait_for_output(proc: subprocess.Popen[bytes], log: Path, pattern: str,
                    timeout: float = 120.0) -> re.Match[str]:
    """The first match of `pattern` in the child's output, once it appears. Fails early
    when the child exits; `timeout` only bounds a hang."""
    deadline = time.monotonic() + timeout
    while True:
        text = log.read_text(errors="replace")
        match = re.search(pattern, text)
        if match:
            return match
        if proc.poll() is not None:
            raise AssertionError(f"exited with {proc.returncode} before /{pattern}/:\n"
                                 f"{text[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no /{pattern}/ within {timeout}s:\n{text[-3000:]}")
        time.sleep(0.1)


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGINT,
         timeout: float = 90.0) -> int:
    """Send `sig` to the command alone (as a test's Ctrl-C would reach a background job's
    leader) and wait for it and every process it started to end; its exit code."""
    proc.send_signal(sig)
    code = proc.wait(timeout)
    deadline = time.monotonic() + timeout
    while group_alive(proc):
        if time.monotonic() > deadline:
            raise AssertionError(f"exited with {code} but left processes running")
        time.sleep(0.1)
    return code
