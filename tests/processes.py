"""Child processes in tests: started in a process group of their own and stopped with all
their descendants whatever happens, and waited for by state, never by time.

    with started([sys.executable, "-m", "odradek", "cluster", "up", ...], log,
                 sigint_ignored=True) as proc:
        text = wait_for_output(proc, log, r"bootstrap\\.servers=(\\S+)")
        ...
        assert stop(proc, signal.SIGINT) == 0

`sigint_ignored` starts the command as `make test &` would: with SIGINT ignored, a
disposition the child inherits and that Python honours (no KeyboardInterrupt ever).

Fixtures and `finally` stop children when a test fails, but not when the test process
itself dies: pytest-timeout's thread method ends a hung run with os._exit, a CI job is
killed. `reap_on_exit(proc)` hands a child to a small reaper process that outlives the
test run by a moment and SIGKILLs what is still running of it then.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
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
    reap_on_exit(proc, group=True)
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


# ---- the reaper: children of a test run that dies without its teardown -------------------

# Waits for its parent (the test run) to go, then SIGKILLs each registered process still
# running — checked by start time, so a recycled pid is never hit — or its whole group.
_REAPER = """
import os, signal, sys, time
parent, registry = int(sys.argv[1]), sys.argv[2]
while os.getppid() == parent:
    time.sleep(0.5)
try:
    lines = open(registry).read().split()
except OSError:
    sys.exit(0)
for entry in lines:
    pid, started, group = entry.split(":")
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rpartition(")")[2].split()[19] != started:
                continue
        if group == "1":
            os.killpg(int(pid), signal.SIGKILL)
        else:
            os.kill(int(pid), signal.SIGKILL)
    except OSError:
        pass
os.unlink(registry)
"""

_reaper: subprocess.Popen[bytes] | None = None
_registry: Path | None = None


def reap_on_exit(proc: subprocess.Popen[bytes] | subprocess.Popen[str], *,
                 group: bool = False) -> None:
    """Have `proc` (and its process group, if it leads one) killed should this test run
    die before stopping it."""
    global _reaper, _registry
    try:
        started = Path(f"/proc/{proc.pid}/stat").read_text().rpartition(")")[2].split()[19]
    except OSError:
        return  # gone already (or no /proc): nothing to reap
    if _reaper is None or _registry is None:
        fd, name = tempfile.mkstemp(prefix="odradek-test-children-")
        os.close(fd)
        _registry = Path(name)
        _reaper = subprocess.Popen([sys.executable, "-c", _REAPER, str(os.getpid()), name],
                                   start_new_session=True, stdin=subprocess.DEVNULL)
    with open(_registry, "a") as f:
        f.write(f"{proc.pid}:{started}:{int(group)}\n")


def stop_reaper() -> None:
    """The run ends normally: its fixtures stopped what they started."""
    global _reaper, _registry
    if _reaper is not None:
        _reaper.kill()
        _reaper.wait(10)
    if _registry is not None:
        _registry.unlink(missing_ok=True)
    _reaper = _registry = None
