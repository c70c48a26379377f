"""Fixtures that start real things: an odradek broker process on a free loopback port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.processes import reap_on_exit, stop_reaper


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port_run(count: int) -> int:
    """The first of `count` consecutive free ports, below the kernel's ephemeral range
    (32768 and up here): a port next to one the kernel handed out is likely to be taken
    by an outgoing connection a moment later."""
    import random

    for _ in range(200):
        base = random.randrange(20000, 32000 - count)
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError(f"no {count} consecutive free ports")


# ApiVersions v0, correlation id 1, client id "t": the smallest request a broker answers
_API_VERSIONS = bytes.fromhex("0000000b" "0012" "0000" "00000001" "0001") + b"t"


def _answers(conn: socket.socket) -> bool:
    """Whether the broker answers a request: its port takes connections (the kernel's
    backlog) before its event loop serves them, and before its metrics endpoint is up."""
    conn.settimeout(2.0)
    conn.sendall(_API_VERSIONS)
    return len(conn.recv(4)) == 4


class BrokerProcess:
    """A broker started as `python -m odradek broker`, as a user would start it."""

    def __init__(self, data_dir: Path, port: int | None = None,
                 overrides: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.overrides = overrides or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"broker-{self.port}.log"
        self.nofile: int | None = None  # RLIMIT_NOFILE of the broker process, if set

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        props = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir),
            **self.overrides,
        }
        cmd = [sys.executable, "-m", "odradek", "broker"]
        for k, v in props.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        log = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the process
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     env=env,
                                     preexec_fn=None if self.nofile is None else self._limits)
        reap_on_exit(self.proc)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.logs()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    if "listeners" in self.overrides or _answers(s):
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        self.kill()  # hung in its start-up: never leave it running behind the failure
        raise RuntimeError(f"broker did not start within {timeout}s:\n{self.logs()}")

    def _limits(self) -> None:
        if self.nofile is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except FileNotFoundError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, no flush beyond what the OS already has."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    stop_reaper()  # the fixtures stopped what they started


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for a test module; tests use their own topic names."""
    b = BrokerProcess(tmp_path_factory.mktemp("broker") / "data").start()
    yield b
    b.stop()


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of the test's own, for tests that kill, restart or reconfigure it."""
    b = BrokerProcess(tmp_path / "data")
    yield b
    b.stop()


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"
