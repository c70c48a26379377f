"""The two load generators behind one interface: librdkafka's C perf tool and `odradek perf`.

Both run as separate processes, so the harness's own Python never competes with the
client it measures, and each run has a hard time limit.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.brokers import die_with_parent

# Producer settings of issue 7's throughput workloads, for both clients.
LINGER_MS = "5"
BATCH_SIZE = "1000000"
# librdkafka's consumer backs off fetching for fetch.queue.backoff.ms (1 s) once its queue
# is full; with small records that is a 1 s stall per fill. Same setting for every broker.
CONSUMER_TUNING = {"fetch.queue.backoff.ms": "10", "queued.min.messages": "1000000"}


class ClientFailed(RuntimeError):
    pass


@dataclass(frozen=True)
class Throughput:
    records: int
    bytes: int
    seconds: float

    @property
    def msgs_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class Latency:
    count: int
    p50_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list (q in 0..100)."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), round(q / 100 * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]


def latency_of(samples_ms: list[float]) -> Latency:
    s = sorted(samples_ms)
    if not s:
        raise ClientFailed("no latency samples")
    return Latency(len(s), statistics.median(s), percentile(s, 99), percentile(s, 99.9), s[-1])


def _kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)


def _spawn(cmd: list[str]) -> subprocess.Popen[str]:
    # A session of its own: a Ctrl-C reaches the harness only, which then kills the tool
    # (a client that is still sending would otherwise skew the next measurement).
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=die_with_parent)


def run_tool(cmd: list[str], timeout: float) -> str:
    """Runs one client to completion within `timeout` seconds; returns its stdout."""
    proc = _spawn(cmd)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as e:
        _kill(proc)
        raise ClientFailed(f"{Path(cmd[0]).name} {cmd[1] if len(cmd) > 1 else ''} "
                           f"timed out after {timeout:.0f}s") from e
    finally:
        _kill(proc)
    if proc.returncode != 0:
        tail = (out + err).strip().splitlines()[-6:]
        raise ClientFailed(f"{Path(cmd[0]).name} exited {proc.returncode}: " + " | ".join(tail))
    return out


def _props(args_flag: str, props: dict[str, str]) -> list[str]:
    out: list[str] = []
    for k, v in props.items():
        out += [args_flag, f"{k}={v}"]
    return out


class Client:
    name = "?"

    def produce(self, bootstrap: str, topic: str, records: int, size: int, acks: str,
                timeout: float, extra: dict[str, str] | None = None) -> Throughput:
        raise NotImplementedError

    def consume(self, bootstrap: str, topic: str, partitions: int, records: int,
                timeout: float) -> Throughput:
        raise NotImplementedError

    def latency(self, bootstrap: str, topic: str, records: int, rate: int, size: int,
                fetch_wait_ms: int, warmup: int, timeout: float) -> Latency:
        raise NotImplementedError


class CClient(Client):
    """librdkafka's rdkafka_performance, parsed from its summary lines."""

    name = "c"
    _PRODUCED = re.compile(
        r"(\d+) messages produced \((\d+) bytes\), (\d+) delivered \(offset -?\d+, (\d+) failed\)"
        r" in (\d+)ms")
    _CONSUMED = re.compile(r"(\d+) messages \((\d+) bytes\) consumed in (\d+)ms")

    def __init__(self, binary: Path) -> None:
        self.binary = binary

    def _cmd(self, mode: str, bootstrap: str, topic: str, *args: str) -> list[str]:
        # -i: one display interval for the whole run, which also turns statistics off.
        return [str(self.binary), mode, "-t", topic, "-b", bootstrap, "-i", "3600000", *args]

    def produce(self, bootstrap: str, topic: str, records: int, size: int, acks: str,
                timeout: float, extra: dict[str, str] | None = None) -> Throughput:
        props = {"linger.ms": LINGER_MS, "batch.size": BATCH_SIZE, **(extra or {})}
        cmd = self._cmd("-P", bootstrap, topic, "-s", str(size), "-c", str(records),
                        "-a", "-1" if acks == "all" else acks, *_props("-X", props))
        found = self._PRODUCED.findall(run_tool(cmd, timeout))
        if not found:
            raise ClientFailed("no summary from rdkafka_performance -P")
        _, nbytes, delivered, failed, ms = (int(x) for x in found[-1])
        if delivered != records or failed:
            raise ClientFailed(f"{delivered} of {records} delivered, {failed} failed")
        return Throughput(delivered, nbytes, max(ms, 1) / 1000)

    def consume(self, bootstrap: str, topic: str, partitions: int, records: int,
                timeout: float, extra: dict[str, str] | None = None) -> Throughput:
        cmd = self._cmd("-C", bootstrap, topic, "-o", "beginning", "-c", str(records))
        for p in range(partitions):
            cmd += ["-p", str(p)]
        cmd += _props("-X", {**CONSUMER_TUNING, **(extra or {})})
        out = run_tool(cmd, timeout)
        found = self._CONSUMED.findall(out)
        if not found:
            raise ClientFailed("no summary from rdkafka_performance -C: " + out[-300:])
        n, nbytes, ms = (int(x) for x in found[-1])
        if n < records:
            raise ClientFailed(f"consumed {n} of {records}")
        return Throughput(n, nbytes, max(ms, 1) / 1000)

    def latency(self, bootstrap: str, topic: str, records: int, rate: int, size: int,
                fetch_wait_ms: int, warmup: int, timeout: float) -> Latency:
        """Two instances with -l: the consumer writes each record's age (µs) to a file."""
        with tempfile.NamedTemporaryFile(prefix="latency-", suffix=".txt") as f:
            consumer = _spawn(self._cmd(
                "-C", bootstrap, topic, "-p", "0", "-o", "beginning", "-l", "-A", f.name,
                "-c", str(records),
                *_props("-X", {"fetch.wait.max.ms": str(fetch_wait_ms), **CONSUMER_TUNING})))
            try:
                # The consumer sits in its fetch loop on the empty topic before the first
                # send; the warm-up records absorb whatever start-up is left.
                time.sleep(1.0)
                if consumer.poll() is not None:
                    raise ClientFailed(f"latency consumer exited {consumer.returncode}: "
                                       f"{consumer.communicate()[0][-300:]}")
                run_tool(self._cmd(
                    "-P", bootstrap, topic, "-p", "0", "-s", str(size), "-l", "-r", str(rate),
                    "-c", str(records), "-a", "-1", *_props("-X", {"linger.ms": LINGER_MS})),
                    timeout)
                try:
                    consumer.communicate(timeout=max(10.0, 2 * fetch_wait_ms / 1000 + 5))
                except subprocess.TimeoutExpired as e:
                    raise ClientFailed("latency consumer did not receive every record") from e
            finally:
                _kill(consumer)
            samples = [int(x) / 1000 for x in Path(f.name).read_text().split()]
        if len(samples) < records:
            raise ClientFailed(f"latency consumer saw {len(samples)} of {records}")
        return latency_of(samples[warmup:])


class PyClient(Client):
    """`odradek perf` (confluent-kafka), through its --json summary."""

    name = "py"

    def _cmd(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "odradek.cli.perf", *args, "--json"]

    @staticmethod
    def _result(out: str) -> dict[str, float]:
        for line in reversed(out.strip().splitlines()):
            if line.startswith("{"):
                data: dict[str, float] = json.loads(line)
                return data
        raise ClientFailed("no JSON summary from odradek perf: " + out[-300:])

    def produce(self, bootstrap: str, topic: str, records: int, size: int, acks: str,
                timeout: float, extra: dict[str, str] | None = None) -> Throughput:
        props = {"acks": acks, "linger.ms": LINGER_MS, "batch.size": BATCH_SIZE,
                 **(extra or {})}
        out = run_tool(self._cmd(
            "produce", "--bootstrap-server", bootstrap, "--topic", topic,
            "--num-records", str(records), "--record-size", str(size), "--throughput", "-1",
            "--timeout", str(int(timeout)), *_props("--producer-props", props)), timeout + 10)
        r = self._result(out)
        if r["errors"] or r["records"] != records:
            raise ClientFailed(f"{int(r['records'])} of {records} delivered, "
                               f"{int(r['errors'])} failed")
        return Throughput(int(r["records"]), int(r["bytes"]), r["seconds"])

    def consume(self, bootstrap: str, topic: str, partitions: int, records: int,
                timeout: float) -> Throughput:
        out = run_tool(self._cmd(
            "consume", "--bootstrap-server", bootstrap, "--topic", topic,
            "--messages", str(records), "--timeout", str(int(timeout)),
            *_props("--consumer-props", CONSUMER_TUNING)), timeout + 10)
        r = self._result(out)
        if r["records"] < records:
            raise ClientFailed(f"consumed {int(r['records'])} of {records}")
        # From the first record on, as the C tool counts, so that the two compare.
        return Throughput(int(r["records"]), int(r["bytes"]), r["data_seconds"])

    def latency(self, bootstrap: str, topic: str, records: int, rate: int, size: int,
                fetch_wait_ms: int, warmup: int, timeout: float) -> Latency:
        out = run_tool(self._cmd(
            "latency", "--bootstrap-server", bootstrap, "--topic", topic,
            "--num-records", str(records), "--throughput", str(rate),
            "--record-size", str(size), "--warmup-records", str(warmup),
            "--timeout", str(int(timeout)),
            *_props("--producer-props", {"linger.ms": LINGER_MS, "acks": "all"}),
            *_props("--consumer-props", {"fetch.wait.max.ms": str(fetch_wait_ms)})),
            timeout + 10)
        r = self._result(out)
        if r["received"] < r["measured"]:
            raise ClientFailed(f"latency consumer saw {int(r['received'])} of "
                               f"{int(r['measured'])}")
        return Latency(int(r["received"]), r["p50_ms"], r["p99_ms"], r["p999_ms"], r["max_ms"])


def choose_client(kind: str) -> Client:
    """`auto`: librdkafka's C perf tool when it can be built, else `odradek perf`; `c`
    or `py` insist on one."""
    from bench import tools

    if kind in ("c", "auto"):
        try:
            return CClient(tools.ensure_rdkafka_performance())
        except tools.ToolUnavailable as e:
            if kind == "c":
                raise SystemExit(f"cannot build rdkafka_performance: {e}") from e
            print(f"! C client unavailable ({e}); using odradek perf", file=sys.stderr,
                  flush=True)
    return PyClient()
