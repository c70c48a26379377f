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
import logging
import os
import signal
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


# ---- the zygote's side ------------------------------------------------------------------

def zygote_main(control_fd: int) -> None:
    from odradek.server import broker as _broker  # noqa: F401 - what the forks share
    from odradek.server import zk_membership as _zk  # noqa: F401
    from odradek.testing import child
    from odradek.testing import embedded as _embedded  # noqa: F401

    control = socket.socket(fileno=control_fd)

    def reap(_sig: int, _frame: object) -> None:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass

    signal.signal(signal.SIGCHLD, reap)
    while True:
        message, fds, _flags, _addr = socket.recv_fds(control, 4096, 1)
        if not message:
            return  # the parent closed the control socket (or died)
        pid = os.fork()
        if pid == 0:
            _forked(control, fds[0], message.decode(), child)
        os.close(fds[0])
        control.sendall(f"{pid}\n".encode())


def _forked(control: socket.socket, fd: int, log_path: str, child: object) -> None:
    """The forked broker process: never returns into the zygote's loop."""
    status = 1
    try:
        control.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 2)
        os.close(log)
        for handler in logging.getLogger().handlers:
            handler.flush()
        channel = socket.socket(fileno=fd)
        rfile = channel.makefile("r", encoding="utf-8")
        wfile = channel.makefile("w", encoding="utf-8")
        child._serve(rfile, wfile)  # type: ignore[attr-defined]
        status = 0
    finally:
        os._exit(status)
