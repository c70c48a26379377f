"""Where the CPU of a Spark job goes, per process and per kind of thread, read from /proc.

The source benchmark runs four kinds of work on the same two cores: the broker, the JVM
(task threads turning Arrow batches into rows, GC, the JIT), the Spark Python workers
(our reader's Python code) and librdkafka's threads inside those workers (fetch,
decompression). A sampler thread reads every thread's CPU time during a run, because
the consumers' threads die with each task and take their counters with them.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from bench.brokers import CLOCK_TICKS, cpu_seconds, process_tree

# The order the table prints them in.
KINDS = ("worker python", "worker librdkafka", "jvm tasks", "jvm gc", "jvm jit", "jvm other",
         "broker", "driver python")


def _stat_fields(path: str) -> tuple[str, list[str]] | None:
    try:
        with open(path) as f:
            raw = f.read()
    except OSError:
        return None
    head, _, tail = raw.rpartition(")")
    return head.partition("(")[2], tail.split()


def _thread_ticks(pid: int) -> Iterator[tuple[int, str, int]]:
    """(tid, thread name, utime+stime ticks) of every thread of a process."""
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            parsed = _stat_fields(f"/proc/{pid}/task/{tid}/stat")
            if parsed is not None:
                name, fields = parsed
                yield int(tid), name, int(fields[11]) + int(fields[12])


def _jvm_kind(name: str) -> str:
    if name.startswith("Executor task"):
        return "jvm tasks"
    if name.startswith(("GC Thread", "G1 ", "VM Thread")):
        return "jvm gc"
    if "CompilerThre" in name:
        return "jvm jit"
    return "jvm other"


def find_jvm(pid: int | None = None) -> int:
    """The Spark JVM this Python driver launched (its descendant named java)."""
    for p in process_tree(pid or os.getpid()):
        parsed = _stat_fields(f"/proc/{p}/stat")
        if parsed is not None and parsed[0] == "java":
            return p
    raise RuntimeError("no Spark JVM under this process")


@dataclass
class CpuSplit:
    """CPU seconds by kind over one measured interval (`with split.measure(): ...`)."""

    jvm_pid: int
    broker_pid: int | None = None
    interval: float = 0.1
    seconds: dict[str, float] = field(default_factory=dict)
    _last: dict[tuple[int, int], tuple[str, int]] = field(default_factory=dict)
    _base: dict[tuple[int, int], int] = field(default_factory=dict)

    def _scan(self, jvm: bool = True) -> dict[tuple[int, int], tuple[str, int]]:
        seen: dict[tuple[int, int], tuple[str, int]] = {}
        if jvm:  # the JVM's threads outlive a run: reading them at both ends is enough
            for tid, name, ticks in _thread_ticks(self.jvm_pid):
                seen[(self.jvm_pid, tid)] = (_jvm_kind(name), ticks)
        for p in process_tree(self.jvm_pid)[1:]:
            for tid, name, ticks in _thread_ticks(p):
                kind = "worker librdkafka" if name.startswith("rdk:") else "worker python"
                seen[(p, tid)] = (kind, ticks)
        return seen

    @contextlib.contextmanager
    def measure(self) -> Iterator[None]:
        self._base = {key: ticks for key, (_, ticks) in self._scan().items()}
        self._last = {}
        broker0 = sum(cpu_seconds(self.broker_pid)) if self.broker_pid else 0.0
        driver0 = time.process_time()
        stop = threading.Event()

        def sample() -> None:
            # Bounded by the measured block: stop is set when it ends.
            while True:
                self._last.update(self._scan(jvm=False))
                if stop.wait(self.interval):
                    return

        sampler = threading.Thread(target=sample, name="cpu-split", daemon=True)
        sampler.start()
        try:
            yield
        finally:
            stop.set()
            sampler.join(5)
            self._last.update(self._scan())
            totals = dict.fromkeys(KINDS, 0.0)
            for key, (kind, ticks) in self._last.items():
                totals[kind] += (ticks - self._base.get(key, 0)) / CLOCK_TICKS
            totals["driver python"] = time.process_time() - driver0
            if self.broker_pid:
                totals["broker"] = sum(cpu_seconds(self.broker_pid)) - broker0
            self.seconds = totals


def busy_cores() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, from /proc/stat's first line."""
    with open("/proc/stat") as f:
        values = [int(x) for x in f.readline().split()[1:]]
    idle = values[3] + values[4]
    return float(sum(values) - idle), float(sum(values))
