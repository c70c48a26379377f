"""Broker processes forked from one that has already imported the broker.

Importing the broker costs about 0.4 s of CPU on an idle machine and several times that
on a busy one; a cluster of three child processes paid it three times, side by side with
ZooKeeper's JVM. A zygote imports once, holds no threads, and forks a broker process per
request (`os.fork` keeps the imported modules): a cluster pays one import, and a
broker restarted by a test none.

The parent talks to the zygote over a Unix socket pair: each `fork` sends it the child
end of a new socket pair (SCM_RIGHTS), which becomes that broker's command channel, and
the path of its log; the zygote answers with the broker's pid and reaps it when it exits.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from odradek.testing.config import TestkitError

__all__ = ["ForkedProcess", "SpawnedProcess", "Zygote"]


class SpawnedProcess:
    """A broker process started with Popen (a single `process=True` broker)."""

    def __init__(self, log_path: Path) -> None:
        with open(log_path, "ab") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "odradek.testing._process"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1,
                # not in the test's process group: a Ctrl-C reaches the test, which stops us
                start_new_session=True)
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self.pid = self._proc.pid
        self.stdin: IO[str] = self._proc.stdin
        self.stdout: IO[str] = self._proc.stdout

    def alive(self) -> bool:
        return self._proc.poll() is None

    def send_signal(self, sig: int) -> None:
        if self.alive():
            self._proc.send_signal(sig)

    def wait(self, timeout: float) -> None:
        self._proc.wait(timeout)

    def close(self) -> None:
        for stream in (self.stdin, self.stdout):
            with contextlib.suppress(OSError):
                stream.close()


class ForkedProcess:
    """A broker process forked by the zygote (its parent), talked to over a socket."""

    def __init__(self, pid: int, channel: socket.socket) -> None:
        self.pid = pid
        self._channel = channel
        self.stdin: IO[str] = channel.makefile("w", encoding="utf-8")
        self.stdout: IO[str] = channel.makefile("r", encoding="utf-8")

    def alive(self) -> bool:
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead, not yet reaped

    def send_signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"broker pid {self.pid}", timeout)
            time.sleep(0.01)

    def close(self) -> None:
        for stream in (self.stdin, self.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        self._channel.close()


class Zygote:
    """The parent's handle on a zygote process."""

    def __init__(self, log_path: Path) -> None:
        ours, theirs = socket.socketpair()
        with open(log_path, "ab") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "odradek.testing._process", "--zygote",
                 str(theirs.fileno())], pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        theirs.close()
        self._control = ours

    def fork(self, log_path: Path, timeout: float = 60.0) -> ForkedProcess:
        """A new broker process; the first waits for the zygote's import."""
        if self._proc.poll() is not None:
            raise TestkitError(f"the zygote process exited with {self._proc.returncode}")
        ours, theirs = socket.socketpair()
        try:
            socket.send_fds(self._control, [str(log_path).encode()], [theirs.fileno()])
        finally:
            theirs.close()
        self._control.settimeout(timeout)
        answer = b""
        try:
            while not answer.endswith(b"\n"):
                chunk = self._control.recv(64)
                if not chunk:
                    raise TestkitError("the zygote process exited")
                answer += chunk
        except TimeoutError:
            ours.close()
            raise TestkitError(f"the zygote did not fork a broker within {timeout}s") from None
        return ForkedProcess(int(answer), ours)

    def stop(self) -> None:
        self._control.close()  # the zygote exits when its control socket closes
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(10)
