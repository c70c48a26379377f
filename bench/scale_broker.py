"""The scale benchmark's broker and raw client: a broker process of its own, measured
from outside (CPU, RSS, descriptors), and a client without a library's costs. Shared by
bench/scale.py and its groups and connections dimensions."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.brokers import cpu_seconds, die_with_parent, free_port
from odradek.protocol.client_framing import ClientFraming, FrameSplitter, decode_response

METADATA = 3
CREATE_BATCH = 20  # topics per CreateTopics request


class RawClient:
    def __init__(self, bootstrap: str, timeout: float = 60.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.framing = ClientFraming("scale-bench")
        self.frames = FrameSplitter()

    def close(self) -> None:
        self.sock.close()

    def call_raw(self, api_key: int, version: int, **fields: Any) -> tuple[int, bytes]:
        cid, request = self.framing.build(api_key, version, **fields)
        self.sock.sendall(request)
        while (frame := self.frames.next_frame()) is None:
            chunk = self.sock.recv(max(self.frames.wanted, 1 << 20))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            self.frames.feed(chunk)
        return cid, frame

    def metadata(self) -> Any:
        cid, frame = self.call_raw(METADATA, 12, topics=None,
                                   allow_auto_topic_creation=False,
                                   include_topic_authorized_operations=False)
        return decode_response(METADATA, 12, frame, cid)


def partitions_served(bootstrap: str) -> int:
    client = RawClient(bootstrap)
    try:
        return sum(len(t.partitions) for t in client.metadata().topics)
    finally:
        client.close()


def metadata_latency_ms(bootstrap: str, rounds: int = 5) -> tuple[float, int]:
    """(median ms, response bytes) of a full Metadata request, on one connection: the
    broker's answer, not its decoding by the client."""
    client = RawClient(bootstrap)
    try:
        times, size = [], 0
        for _ in range(rounds):
            started = time.perf_counter()
            _cid, frame = client.call_raw(METADATA, 12, topics=None,
                                          allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False)
            times.append((time.perf_counter() - started) * 1000)
            size = len(frame)
        return sorted(times)[len(times) // 2], size
    finally:
        client.close()


@dataclass(eq=False)
class ScaleBroker:
    data_dir: Path
    log_path: Path
    extra: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        props = {"listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                 "log.dirs": str(self.data_dir), "metrics.port": "-1", **self.extra}
        cmd = [sys.executable, "-m", "odradek", "broker", "--log-level", "INFO"]
        for k, v in props.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd

    def start(self, expect_partitions: int, timeout: float = 900.0) -> float:
        """Seconds from the exec until a full Metadata lists every partition."""
        started = time.monotonic()
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=die_with_parent,
                env=self.env())
        while time.monotonic() - started < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n"
                                   f"{self.log_tail()}")
            with contextlib.suppress(OSError):
                if partitions_served(self.bootstrap) >= expect_partitions:
                    return time.monotonic() - started
            time.sleep(0.05)
        raise RuntimeError(f"broker not ready within {timeout:.0f}s:\n{self.log_tail()}")

    @staticmethod
    def env() -> dict[str, str]:
        """With bytecode caching on, as an installed broker runs: without it every start
        compiles the whole package again (seconds on a loaded machine)."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 300.0) -> float:
        """Seconds from the signal until the process is gone."""
        if self.proc is None or self.proc.poll() is not None:
            return 0.0
        started = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        return time.monotonic() - started

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def startup_work_s(self) -> float:
        """The broker's own start-up, by its log: its "loaded N logs from … in S s"
        line's S plus the time from that line to "started" — the restart without the
        interpreter's start and imports (seconds of them on a loaded machine)."""
        loaded_s: float | None = None
        loaded_at = started_at = None
        with contextlib.suppress(OSError):
            for line in self.log_path.read_text(errors="replace").splitlines():
                if " loaded " in line and " logs from " in line:
                    with contextlib.suppress(ValueError, IndexError):
                        loaded_s = float(line.rsplit(" in ", 1)[1].rstrip("s"))
                        loaded_at = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
                elif " started, cluster " in line:
                    with contextlib.suppress(ValueError):
                        started_at = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
        if loaded_s is None or loaded_at is None or started_at is None:
            return 0.0
        return loaded_s + (started_at - loaded_at).total_seconds()

    def log_tail(self, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-chars:]
        return ""


def topic_names(size: int, per_topic: int) -> list[tuple[str, int]]:
    """(topic, partitions) adding up to `size` partitions."""
    out = []
    left, i = size, 0
    while left > 0:
        n = min(per_topic, left)
        out.append((f"scale-{i:05d}", n))
        left -= n
        i += 1
    return out


def create_topics(bootstrap: str, topics: list[tuple[str, int]]) -> float:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000})
    started = time.monotonic()
    for i in range(0, len(topics), CREATE_BATCH):  # requests of 1,000 partitions
        futures = admin.create_topics(
            [NewTopic(t, n, 1) for t, n in topics[i:i + CREATE_BATCH]],
            operation_timeout=900, request_timeout=900)
        for f in futures.values():
            f.result()
    return time.monotonic() - started


def idle_cpu_percent(pid: int, seconds: float) -> float:
    before = sum(cpu_seconds(pid))
    started = time.monotonic()
    time.sleep(seconds)  # a measurement window, not a synchronisation
    return (sum(cpu_seconds(pid)) - before) / (time.monotonic() - started) * 100
