"""A schema registry started as a user starts one: `python -m odradek schema-registry`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import BrokerProcess, free_port

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryProcess:
    def __init__(self, bootstrap: str, log_dir: Path, topic: str = "_schemas",
                 group_id: str = "schema-registry", port: int | None = None,
                 extra: list[str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.port = port or free_port()
        self.topic = topic
        self.group_id = group_id
        self.extra = extra or []
        self.log_path = log_dir / f"registry-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0, ignore_sigint: bool = False) -> RegistryProcess:
        """`ignore_sigint`: start it as `cmd &` from a script does, SIGINT ignored."""
        cmd = [sys.executable, "-m", "odradek", "schema-registry", "-b", self.bootstrap,
               "--listeners", self.url, "--topic", self.topic, "--group-id", self.group_id,
               "--log-level", "INFO", *self.extra]
        log = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the process
        def ignore() -> None:
            signal.signal(signal.SIGINT, signal.SIG_IGN)

        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1"),
                                     preexec_fn=ignore if ignore_sigint else None)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"registry exited with {self.proc.returncode}:\n"
                                   f"{self.logs()}")
            try:
                if httpx.get(f"{self.url}/", timeout=1).status_code in (200, 401):
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"registry did not start within {timeout}s:\n{self.logs()}")

    def wait_for_leader(self, timeout: float = 30.0, level: str = "BACKWARD") -> None:
        """Until a write succeeds here (the group has elected a leader); the write sets
        the global compatibility `level`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = httpx.put(f"{self.url}/config", json={"compatibility": level}, timeout=35)
            if r.status_code == 200:
                return
            time.sleep(0.1)
        raise RuntimeError(f"no registry leader within {timeout}s:\n{self.logs()}")

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """The module's broker, electing registry leaders without the 3 s group start delay."""
    b = BrokerProcess(tmp_path_factory.mktemp("broker") / "data",
                      overrides={"group.initial.rebalance.delay.ms": "0"})
    try:
        yield b.start()
    finally:
        b.stop()


@pytest.fixture(scope="module")
def registry(broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[RegistryProcess]:
    """One registry on the module's broker, with its own `_schemas` topic and group."""
    tag = uuid.uuid4().hex[:8]
    r = RegistryProcess(broker.bootstrap, tmp_path_factory.mktemp("registry"),
                        topic=f"_schemas-{tag}", group_id=f"sr-{tag}")
    try:
        r.start().wait_for_leader()
        yield r
    finally:
        r.stop()


@pytest.fixture
def subject() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


def api(method: str, url: str, body: object = None, **params: str) -> httpx.Response:
    return httpx.request(method, url, json=body, params=params or None,
                         headers={"Content-Type": CONTENT_TYPE}, timeout=35)
