"""Start and stop the brokers under test on loopback, and read their CPU time and memory.

Three brokers: odradek (writes Kafka's files to a scratch directory), the peer (Tansu with
its in-memory engine) and the client-bound limit (the same Tansu binary with `null://sink`,
which accepts and discards). Each runs as a child in its own session, so a Ctrl-C in the
terminal reaches the harness, which stops them in order; if the harness itself is killed,
the kernel kills them (PR_SET_PDEATHSIG), so no broker outlives a run.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024

BROKER_NAMES = ("odradek", "peer", "limit")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def die_with_parent() -> None:
    """Runs in the child between fork and exec: SIGKILL it when the harness dies."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


# --- /proc readings ------------------------------------------------------------------

def _children_of(pid: int) -> list[int]:
    """Direct children, from /proc/<pid>/task/*/children (one read per thread)."""
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children") as f:
                out.extend(int(x) for x in f.read().split())
    return out


def process_tree(pid: int, limit: int = 256) -> list[int]:
    """pid and its descendants (bounded: a broker does not fork hundreds of processes)."""
    tree: list[int] = []
    todo = [pid]
    while todo and len(tree) < limit:
        p = todo.pop()
        tree.append(p)
        todo.extend(_children_of(p))
    return tree


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(user, system) CPU of the process tree, with the children it has already reaped."""
    user = system = 0
    for p in process_tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                # The command name may hold spaces: fields are counted after its ')'.
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
        user += utime + (cutime if p == pid else 0)
        system += stime + (cstime if p == pid else 0)
    return user / CLOCK_TICKS, system / CLOCK_TICKS


def minor_faults(pid: int) -> int:
    """Minor page faults of the process tree: pages the heap took fresh from the kernel
    (server/heap.py), which this VM makes dear."""
    total = 0
    for p in process_tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                total += int(f.read().rsplit(")", 1)[1].split()[7])
        except (OSError, IndexError, ValueError):
            continue
    return total


def _status_kib(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def rss_kib(pid: int) -> int:
    return sum(_status_kib(p, "VmRSS") for p in process_tree(pid))


def hwm_kib(pid: int) -> int:
    """The kernel's own peak-RSS mark of each process of the tree, summed."""
    return sum(_status_kib(p, "VmHWM") for p in process_tree(pid))


class RssSampler:
    """Samples the tree's RSS in a thread, for the peak of a multi-process broker."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        # Bounded by the broker's life: stop() is called when the broker stops.
        while not self._stop.wait(self.interval):
            self.peak_kib = max(self.peak_kib, rss_kib(self.pid))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)


# --- the brokers ---------------------------------------------------------------------

class BrokerFailed(RuntimeError):
    pass


@dataclass(eq=False)
class Broker:
    """One broker process on 127.0.0.1; `command` is built once the port is known."""

    name: str
    build_command: Callable[[int, Path], list[str]]
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    data_dir: Path | None = None
    log_path: Path | None = None
    sampler: RssSampler | None = None
    bytes_in: int = 0  # bytes the workloads produced into this broker since start
    version: str = ""

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        self.port = free_port()
        self.data_dir = Path(tempfile.mkdtemp(prefix=f"{self.name}-data-", dir=self.workdir))
        self.log_path = self.workdir / f"{self.name}-{self.port}.log"
        cmd = self.build_command(self.port, self.data_dir)
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed when the process is stopped
        try:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
                start_new_session=True, preexec_fn=die_with_parent)
        finally:
            log.close()
        _LIVE.add(self)
        self.bytes_in = 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BrokerFailed(f"{self.name} exited with {self.proc.returncode} at start:\n"
                                   f"{self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.05)
        else:
            self.stop()
            raise BrokerFailed(f"{self.name} did not listen within {timeout:.0f}s:\n"
                               f"{self.log_tail()}")
        self.sampler = RssSampler(self.proc.pid)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def cpu(self) -> float:
        return sum(self.cpu_split())

    def cpu_split(self) -> tuple[float, float]:
        """(user, system) seconds: system time shows what the kernel does for the broker
        (page cache, sockets), which no change to its own code removes."""
        return cpu_seconds(self.pid) if self.alive() else (0.0, 0.0)

    def faults(self) -> int:
        return minor_faults(self.pid) if self.alive() else 0

    def peak_rss_mib(self) -> float:
        if self.proc is None:
            return 0.0
        sampled = self.sampler.peak_kib if self.sampler else 0
        return max(sampled, hwm_kib(self.pid) if self.alive() else 0) / 1024

    def log_tail(self, chars: int = 3000) -> str:
        if self.log_path is None:
            return ""
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, keep_data: bool = False) -> None:
        if self.sampler is not None:
            self.sampler.stop()
            self.sampler = None
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        # Whatever the broker forked shares its session: make sure none is left.
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        _LIVE.discard(self)
        if self.data_dir is not None and not keep_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None


_LIVE: set[Broker] = set()


def stop_all() -> None:
    """Stops every broker still running (the harness's finally and atexit path)."""
    for b in list(_LIVE):
        b.stop()


def odradek_broker(workdir: Path, extra: dict[str, str] | None = None,
                   src: Path | None = None) -> Broker:
    """`src`: run the odradek package from this source tree (a snapshot of a revision)
    instead of the one installed in the venv."""
    def command(port: int, data_dir: Path) -> list[str]:
        props = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(data_dir),
                 **(extra or {})}
        cmd = [sys.executable, "-m", "odradek", "broker", "--log-level", "WARNING"]
        for k, v in props.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd

    env = {"PYTHONPATH": str(src)} if src is not None else {}
    return Broker("odradek", command, workdir, env=env)


def tansu_broker(name: str, binary: Path, storage: str, workdir: Path) -> Broker:
    def command(port: int, data_dir: Path) -> list[str]:
        url = f"tcp://127.0.0.1:{port}"
        return [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", storage]

    # Tansu logs every request at info level by default; keep its log small.
    return Broker(name, command, workdir, env={"RUST_LOG": "warn"})
