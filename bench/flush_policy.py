"""What each flush policy costs: `python bench/flush_policy.py [--records N] [--rounds R]`.

One broker per policy on loopback, data on the machine's disk (`--dir`, default the
system temp dir: check it is not a tmpfs, or the fsyncs cost nothing). Per policy:
- throughput: `--records` records of `--size` bytes from one confluent-kafka producer,
  acks=1, linger.ms=5 (batches of many records: a flush.messages=1 broker fsyncs per
  batch, not per record);
- latency: `--sequential` records sent one at a time, each awaited (a batch of one:
  the fsync per acknowledgement is all there is to see), p50 and p99.
The policies alternate within each round, and the table shows medians over the rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable as a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.brokers import odradek_broker, stop_all
from bench.clients import percentile
from bench.workloads import create_topic

POLICIES: dict[str, dict[str, str]] = {
    "no flush (Kafka's default)": {},
    "flush.ms=1000": {"log.flush.interval.ms": "1000"},
    "flush.messages=1000": {"log.flush.interval.messages": "1000"},
    "flush.messages=1": {"log.flush.interval.messages": "1"},
}


def throughput(bootstrap: str, topic: str, records: int, size: int) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                  "log_level": 2})
    value = b"x" * size
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(120):
        raise RuntimeError("records left unacknowledged")
    return records / (time.perf_counter() - started)


def latencies(bootstrap: str, topic: str, count: int, size: int) -> list[float]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0,
                  "log_level": 2})
    value = b"y" * size
    p.produce(topic, value)
    p.flush(30)  # connected, metadata known
    out = []
    for _ in range(count):
        started = time.perf_counter()
        p.produce(topic, value)
        if p.flush(30):
            raise RuntimeError("record left unacknowledged")
        out.append((time.perf_counter() - started) * 1000)
    return sorted(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--sequential", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="flush-bench-", dir=args.dir))
    rates: dict[str, list[float]] = {name: [] for name in POLICIES}
    lat: dict[str, list[float]] = {name: [] for name in POLICIES}
    try:
        for r in range(args.rounds):
            names = list(POLICIES) if r % 2 == 0 else list(reversed(POLICIES))
            for name in names:
                broker = odradek_broker(work, POLICIES[name])
                broker.start()
                try:
                    create_topic(broker.bootstrap, "flush", 1)
                    rates[name].append(
                        throughput(broker.bootstrap, "flush", args.records, args.size))
                    lat[name].extend(
                        latencies(broker.bootstrap, "flush", args.sequential, args.size))
                finally:
                    broker.stop()
                print(f"round {r + 1} {name}: {rates[name][-1]:,.0f} records/s",
                      file=sys.stderr, flush=True)
    finally:
        stop_all()

    base = statistics.median(rates["no flush (Kafka's default)"])
    print(f"\n{args.records:,} records of {args.size} B, acks=1, linger.ms=5, "
          f"{args.rounds} rounds; latency: {args.sequential} records one at a time per round")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores, "
          f"data in {work}\n")
    print("| policy | records/s | MB/s | vs no flush | one record p50 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in POLICIES:
        rate = statistics.median(rates[name])
        samples = sorted(lat[name])
        print(f"| {name} | {rate:,.0f} | {rate * args.size / 1e6:.2f} | {rate / base:.2f} | "
              f"{percentile(samples, 50):.2f} | {percentile(samples, 99):.2f} |")
    print("\nreproduce: python bench/flush_policy.py "
          f"--records {args.records} --rounds {args.rounds}")


if __name__ == "__main__":
    main()
