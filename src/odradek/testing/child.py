"""A test broker in a child process, driven over its stdin and stdout.

The parent writes one JSON command per line and reads one JSON answer per line:
`{"op": "start", "properties": {...}}` → `{"port": P}`, then `create_topic`,
`delete_topic`, `faults` (a method of Faults with its arguments), `leader`, `brokers`,
`stop`. The child imports the broker before it reads its first command, so a parent
can overlap that import with other work (a cluster starts its ZooKeeper meanwhile).
The child stops its broker and exits when its stdin closes: a test process that dies
leaves no broker behind. Logs go to `broker.log` next to the data dir.

Being a process is what lets a cluster's broker be killed (SIGKILL) or frozen
(SIGSTOP) as a real one is.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from kio.schema.errors import ErrorCode

from odradek.testing.config import TestkitError
from odradek.testing.faults import Fault, parse_api, parse_error
from odradek.testing.zygote import ForkedProcess, SpawnedProcess, Zygote

__all__ = ["ChildBroker", "RemoteFaults"]


class ChildBroker:
    """The parent's handle on one child broker process."""

    def __init__(self, properties: Mapping[str, str], data_dir: Path,
                 log_path: Path | None = None, zygote: Zygote | None = None) -> None:
        self.properties = dict(properties)
        self.data_dir = data_dir
        self.log_path = log_path or data_dir.parent / f"{data_dir.name}.log"
        self.proc: SpawnedProcess | ForkedProcess | None = None
        self._zygote = zygote
        self._lock = threading.Lock()
        self.faults = RemoteFaults(self)
        self.paused = False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.alive()

    def spawn(self) -> None:
        """Start the process; it imports the broker (or was forked from a process that
        has) and waits for `start`."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self._zygote is not None:
            self.proc = self._zygote.fork(self.log_path)
        else:
            self.proc = SpawnedProcess(self.log_path)

    def start(self, timeout: float = 60.0) -> int:
        if self.proc is None or not self.running:
            self.spawn()
        answer = self.request("start", timeout=timeout, properties=self.properties)
        return int(answer["port"])

    def request(self, op: str, timeout: float = 30.0, **args: Any) -> dict[str, Any]:
        """Send one command and wait for its answer."""
        with self._lock:
            self.send(op, **args)
            return self.receive(op, timeout)

    def send(self, op: str, **args: Any) -> None:
        proc = self.proc
        if proc is None or not proc.alive():
            raise TestkitError(f"the broker process is not running{self._tail()}")
        if self.paused:
            raise TestkitError("the broker is paused: resume() it first")
        try:
            proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
            proc.stdin.flush()
        except OSError:
            raise TestkitError(f"the broker process died{self._tail()}") from None

    def receive(self, op: str, timeout: float = 30.0) -> dict[str, Any]:
        """The answer to the command sent last (`send` and `receive` let a cluster start
        its brokers side by side)."""
        proc = self.proc
        if proc is None:
            raise TestkitError(f"the broker process is not running{self._tail()}")
        line = _read_line(proc.stdout, timeout)
        if line is None:
            raise TestkitError(f"the broker process did not answer {op} within "
                               f"{timeout}s{self._tail()}")
        if not line:
            raise TestkitError(f"the broker process exited during {op}{self._tail()}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            if answer.get("kafka_error") is not None:
                from odradek.protocol.errors import KafkaError

                raise KafkaError(answer["error"], ErrorCode(answer["kafka_error"]))
            raise TestkitError(answer["error"])
        return answer

    def _tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return f": {lines[-1]}" if lines else ""

    def stop(self, timeout: float = 30.0) -> None:
        proc = self.proc
        if proc is None:
            return
        if self.paused:
            self.resume()
        if proc.alive():
            with contextlib.suppress(TestkitError, OSError, ValueError):
                self.request("stop", timeout=timeout)
        self._reap(timeout)

    def kill(self) -> None:
        """SIGKILL: no clean shutdown; its ZooKeeper session lingers until it expires."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
        self.paused = False
        self._reap(10)

    def pause(self) -> None:
        """SIGSTOP: it neither serves, fetches nor heartbeats to ZooKeeper."""
        if self.proc is not None and self.running and not self.paused:
            self.proc.send_signal(signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        if self.proc is not None and self.paused:
            self.proc.send_signal(signal.SIGCONT)
            self.paused = False

    def _reap(self, timeout: float) -> None:
        proc = self.proc
        if proc is None:
            return
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        proc.close()
        self.proc = None


def _read_line(stream: IO[str], timeout: float) -> str | None:
    """A line from the child, or None after `timeout` (its answer never came)."""
    import selectors

    with selectors.DefaultSelector() as sel:
        sel.register(stream, selectors.EVENT_READ)
        if not sel.select(timeout):
            return None
    return stream.readline()


class RemoteFaults:
    """`Faults` of a broker in a child process: the same calls, checked here first."""

    def __init__(self, child: ChildBroker) -> None:
        self._child = child

    def _call(self, method: str, *args: Any, **kwargs: Any) -> list[str]:
        answer = self._child.request("faults", method=method, args=args, kwargs=kwargs)
        return list(answer.get("injected", []))

    def fail(self, api: str | int, error: str | int | ErrorCode, count: int | None = 1,
             topic: str | None = None) -> None:
        code = parse_error(error)
        self._call("fail", parse_api(api), int(code), count, topic)

    def delay(self, api: str | int, ms: int, count: int | None = None,
              topic: str | None = None) -> None:
        self._call("delay", parse_api(api), ms, count, topic)

    def disconnect(self, api: str | int, count: int | None = 1,
                   topic: str | None = None) -> None:
        self._call("disconnect", parse_api(api), count, topic)

    def clear(self) -> None:
        self._call("clear")

    @property
    def injected(self) -> list[str]:
        return self._call("injected")

    @property
    def pending(self) -> list[Fault]:
        raise TestkitError("pending faults are only listed in the broker's process")
