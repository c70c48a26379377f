"""How long another client waits while a big topic is created and deleted:
`python bench/admin_stall.py [partitions ...]` (default 1 1000 5000).

One broker (`python -m odradek broker`, PYTHONPATH's odradek); for each size, a topic is
created (CreateTopics v7) and then deleted (DeleteTopics v6) while a second connection
sends ApiVersions round trips back to back. Prints each call's time and the prober's
slowest round trip, and when the deleted partitions' dirs were all renamed `…-delete`
(the broker does that after answering DeleteTopics): the delete rate is the partitions
over that time. Compare revisions by putting the other `src/` first on PYTHONPATH.
Issue 11 asks the slowest round trip under 1 s.
"""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: `tests` and `odradek` importable
    root = Path(__file__).resolve().parent.parent
    sys.path[:0] = [str(root), str(root / "src")]

from bench.brokers import free_port
from tests.security.authz import make
from tests.wire import WireClient

MS = datetime.timedelta(milliseconds=1)


class Prober(threading.Thread):
    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.worst, self.stopped = bootstrap, 0.0, threading.Event()

    def run(self) -> None:
        with WireClient(self.bootstrap, timeout=300) as w:
            while not self.stopped.is_set():
                start = time.monotonic()
                w.call(18, 3, client_software_name="bench", client_software_version="1")
                self.worst = max(self.worst, time.monotonic() - start)


def _timed(prober: Prober, call: object) -> tuple[float, float]:
    prober.worst = 0.0
    start = time.monotonic()
    call()  # type: ignore[operator]
    return time.monotonic() - start, prober.worst


def _renamed(data: str, name: str, started: float) -> float:
    """Seconds from `started` until no dir of topic `name` is left unrenamed."""
    live = re.compile(rf"{re.escape(name)}-\d+")
    while any(live.fullmatch(d) for d in os.listdir(data)):
        time.sleep(0.01)
    return time.monotonic() - started


def main(sizes: list[int]) -> None:
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        broker = subprocess.Popen(
            [sys.executable, "-m", "odradek", "broker", "--override",
             f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={data}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
        try:
            bootstrap = f"127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    WireClient(bootstrap).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            prober = Prober(bootstrap)
            prober.start()
            print(f"load average {os.getloadavg()[0]:.1f}")
            print("| partitions | create s | slowest other client ms | delete s | slowest ms "
                  "| dirs renamed s | deleted/s |")
            print("|---:|---:|---:|---:|---:|---:|---:|")
            with WireClient(bootstrap, timeout=600) as w:
                for n in sizes:
                    name = f"stall-{n}"
                    topic = make(w.schema(19, 7).CreatableTopic, name=name, num_partitions=n,
                                 replication_factor=1)
                    create = _timed(prober, lambda t=topic: w.call(
                        19, 7, topics=(t,), timeout=600_000 * MS))
                    state = make(w.schema(20, 6).DeleteTopicState, name=name, topic_id=None)
                    started = time.monotonic()
                    delete = _timed(prober, lambda s=state: w.call(
                        20, 6, topics=(s,), timeout=600_000 * MS))
                    renamed = _renamed(data, name, started)
                    worst = max(delete[1], prober.worst)  # the renames may outlast the call
                    print(f"| {n:,} | {create[0]:.2f} | {create[1] * 1000:.0f} | "
                          f"{delete[0]:.2f} | {worst * 1000:.0f} | {renamed:.2f} | "
                          f"{n / renamed:,.0f} |", flush=True)
            prober.stopped.set()
        finally:
            broker.terminate()
            broker.wait(60)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1, 1000, 5000])
