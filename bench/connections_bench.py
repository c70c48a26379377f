"""What idle connections cost a broker, and what its connection limits cost a flood.

With 1, 1,000 and 10,000 idle connections held open (from 127.0.0.2), a real broker
(`odradek broker` as a child process) is measured for:
- its RSS growth over the broker with none;
- the ApiVersions round trip of another client (from 127.0.0.1): median and worst of 50;
- how fast it turns away connections over `max.connections.per.ip` (the flood's own
  limit is the size held, via max.connections.per.ip.overrides): refusals per second,
  each closed at once.

    python -m bench.connections_bench [--sizes 1,1000,10000]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import tempfile
import time
from pathlib import Path

from bench.brokers import odradek_broker, rss_kib
from odradek.protocol.client_framing import ClientFraming


def _connect(port: int, source: str) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def _round_trip_ms(port: int) -> float:
    _, request = ClientFraming("bench").build(18, 3, client_software_name="b",
                                              client_software_version="1")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        started = time.perf_counter()
        s.sendall(request)
        s.recv(65536)
        return (time.perf_counter() - started) * 1000


def measure(size: int, workdir: Path, refusals: int = 500) -> tuple[float, float, float, float]:
    broker = odradek_broker(workdir, {"max.connections.per.ip.overrides": f"127.0.0.2:{size}"})
    broker.start()
    held: list[socket.socket] = []
    try:
        time.sleep(1)  # let start-up allocations settle before the baseline
        base = rss_kib(broker.pid)
        held = [_connect(broker.port, "127.0.0.2") for _ in range(size)]
        # each is accepted by the broker once it answers a request on a later one
        trips = [_round_trip_ms(broker.port) for _ in range(50)]
        grown_mib = (rss_kib(broker.pid) - base) / 1024
        started = time.perf_counter()
        for _ in range(refusals):
            s = _connect(broker.port, "127.0.0.2")
            s.settimeout(10)
            with contextlib.suppress(ConnectionResetError):  # closed either way
                assert s.recv(1) == b""
            s.close()
        rate = refusals / (time.perf_counter() - started)
        return grown_mib, statistics.median(trips), max(trips), rate
    finally:
        for s in held:
            s.close()
        broker.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,1000,10000")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'idle connections':>18}{'RSS growth MiB':>16}{'RTT p50 ms':>12}"
          f"{'RTT max ms':>12}{'refusals/s':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            grown, p50, worst, rate = measure(n, Path(tmp))
            print(f"{n:>18,}{grown:>16.1f}{p50:>12.2f}{worst:>12.2f}{rate:>12.0f}")


if __name__ == "__main__":
    main()
