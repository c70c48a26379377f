"""Does a registry hosted in the broker slow its produce requests?

    .venv/bin/python -m bench.registry_hosted [--records 1000] [--rounds 3]

Starts `odradek broker` with `schema.registry.listeners` (the registry in the broker's
process, on its own thread), then times produce round trips (one record at a time,
acks=1, confluent-kafka, each waited for) with the registry idle and while another
thread registers new Avro schemas as fast as the registry takes them (every
registration parses, checks compatibility and appends to `_schemas` in the same
process). Rounds alternate idle / busy so the machine's load falls on both alike.
Prints p50, p99 and max per phase, and the registrations/s reached meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

if __package__ in (None, ""):  # run as a script: make `bench` importable as a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.brokers import odradek_broker

CT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def produce_latencies(bootstrap: str, topic: str, count: int) -> list[float]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})
    producer.produce(topic, b"warm-up")
    producer.flush(30)
    out = []
    for i in range(count):
        start = time.perf_counter()
        producer.produce(topic, b"x" * 100, key=str(i).encode())
        producer.flush(30)
        out.append((time.perf_counter() - start) * 1000)
    return out


def register_until(url: str, stop: threading.Event, counter: list[int]) -> None:
    with httpx.Client(timeout=30, headers=CT) as client:
        while not stop.is_set():
            n = counter[0]
            schema = json.dumps({"type": "record", "name": f"E{n}_{os.getpid()}", "fields": [
                {"name": "id", "type": "long"}, {"name": "tags", "type": {
                    "type": "array", "items": "string"}}]})
            client.post(f"{url}/subjects/bench-{n}/versions", json={"schema": schema})
            counter[0] += 1


def summary(label: str, ms: list[float], regs: float | None) -> str:
    q = statistics.quantiles(ms, n=100)
    reg = f"{regs:.0f}/s" if regs is not None else "—"
    return (f"| {label} | {len(ms)} | {q[49]:.2f} | {q[98]:.2f} | {max(ms):.2f} | {reg} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000, help="produces per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    url = f"http://127.0.0.1:{free_port()}"
    with tempfile.TemporaryDirectory(prefix="odradek-hosted-") as tmp:
        broker = odradek_broker(Path(tmp), {"schema.registry.listeners": url,
                                            "group.initial.rebalance.delay.ms": "0",
                                            "auto.create.topics.enable": "true"})
        broker.start()
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    if httpx.put(f"{url}/config", json={"compatibility": "NONE"},
                                 timeout=30).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
            idle: list[float] = []
            busy: list[float] = []
            registered = 0
            busy_s = 0.0
            for r in range(args.rounds):
                idle += produce_latencies(broker.bootstrap, f"idle-{r}", args.records)
                stop, counter = threading.Event(), [registered]
                loader = threading.Thread(target=register_until, args=(url, stop, counter))
                loader.start()
                while counter[0] == registered:  # registrations are under way
                    time.sleep(0.01)
                start = time.monotonic()
                busy += produce_latencies(broker.bootstrap, f"busy-{r}", args.records)
                busy_s += time.monotonic() - start
                stop.set()
                loader.join()
                registered = counter[0]
        finally:
            broker.stop()
    load = os.getloadavg()[0]
    print(f"produce round trips, acks=1, 100 B, one at a time; {args.rounds} rounds "
          f"alternating; load average {load:.1f}")
    print("| registry | produces | p50 ms | p99 ms | max ms | registrations meanwhile |")
    print("| --- | --- | --- | --- | --- | --- |")
    print(summary("idle (hosted, no requests)", idle, None))
    print(summary("registering in the same process", busy, registered / max(busy_s, 1e-9)))


if __name__ == "__main__":
    main()
