"""What clients that misbehave with memory cost a broker (issue 21's goals).

Against a real broker (`odradek broker` as a child process, or a revision's snapshot
with --rev for a before/after), each row prints the broker's RSS growth and another
client's ApiVersions round trips:
- never-read: a raw client pipelines N Fetch requests of max_bytes 50 MB over a topic
  of M MB and never reads its socket (goal: RSS < +64 MB, other p99 within 20%);
- stalled: C connections announce 100 MB frames, send 100 KB and stall (goal:
  < +64 MB, busy client's p99 < 20 ms);
- consume: a confluent-kafka consumer reads a topic of M MB whole (goal: RSS growth
  < 100 MB, throughput not below the previous revision's).

    python -m bench.memory_bench [--rev REV] [--never-read 500 --topic-mb 205]
        [--stalled 100] [--consume-mb 1024]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench import tools
from bench.brokers import Broker, odradek_broker, rss_kib
from odradek.protocol.client_framing import ClientFraming
from odradek.protocol.messages import encode_request, request_class

MB = 1024 * 1024
ROOT = Path(__file__).resolve().parent.parent


def _trips(port: int, rounds: int) -> list[float]:
    framing = ClientFraming("bench")
    out = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        for _ in range(rounds):
            _, request = framing.build(18, 3, client_software_name="b",
                                       client_software_version="1")
            started = time.perf_counter()
            s.sendall(request)
            s.recv(65536)
            out.append((time.perf_counter() - started) * 1000)
    return out


def _p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98]


def _fill(bootstrap: str, topic: str, megabytes: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "message.max.bytes": 2 * MB})
    for _ in range(2 * megabytes):
        producer.produce(topic, b"x" * (512 * 1024))
        producer.poll(0)
    producer.flush(120)


def _fetch(topic: str, correlation: int) -> bytes:
    schema = request_class(1, 4)
    module = sys.modules[schema.__module__]
    return encode_request(1, 4, correlation, "hog", schema(
        replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=50 * MB,
        isolation_level=0, topics=(module.FetchTopic(topic=topic, partitions=(
            module.FetchPartition(partition=0, fetch_offset=0,
                                  partition_max_bytes=50 * MB),)),)))


def never_read(broker: Broker, requests: int, topic_mb: int) -> str:
    _fill(broker.bootstrap, "big", topic_mb)
    _trips(broker.port, 20)
    base, quiet = rss_kib(broker.pid), _trips(broker.port, 300)
    hog = socket.create_connection(("127.0.0.1", broker.port))
    try:
        hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        hog.setblocking(False)
        pending = b"".join(_fetch("big", c) for c in range(requests))
        sent, busy = 0, []
        deadline = time.monotonic() + 120
        while (sent < len(pending) and time.monotonic() < deadline) or len(busy) < 300:
            with contextlib.suppress(BlockingIOError):
                sent += hog.send(pending[sent:])
            busy += _trips(broker.port, 10)
        grown = (rss_kib(broker.pid) - base) / 1024
    finally:
        hog.close()
    return (f"| never-read: {requests} fetches of 50 MB, topic {topic_mb} MB | RSS "
            f"+{grown:.1f} MiB | other p99 {_p99(quiet):.2f} → {_p99(busy):.2f} ms "
            f"(ratio {_p99(busy) / _p99(quiet):.2f}) |")


def stalled(broker: Broker, connections: int) -> str:
    _trips(broker.port, 20)
    base = rss_kib(broker.pid)
    held = []
    try:
        for _ in range(connections):
            s = socket.create_connection(("127.0.0.1", broker.port))
            s.sendall((100 * MB - 1).to_bytes(4, "big") + b"\0" * (100 * 1024))
            held.append(s)
        busy = _trips(broker.port, 500)
        grown = (rss_kib(broker.pid) - base) / 1024
    finally:
        for s in held:
            s.close()
    return (f"| stalled: {connections} connections announce 100 MB, send 100 KB | RSS "
            f"+{grown:.1f} MiB | busy p50 {statistics.median(busy):.2f} ms, p99 "
            f"{_p99(busy):.2f} ms |")


def consume(broker: Broker, megabytes: int) -> str:
    _fill(broker.bootstrap, "data", megabytes)
    base, peak = rss_kib(broker.pid), 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "fetch.max.bytes": 50 * MB, "max.partition.fetch.bytes": 10 * MB,
                         "fetch.message.max.bytes": 10 * MB})
    consumer.subscribe(["data"])
    got, started = 0, 0.0
    try:
        while got < megabytes * MB:
            for m in consumer.consume(100, 1.0):
                if not started:
                    started = time.monotonic()
                got += len(m.value() or b"")
            peak = max(peak, rss_kib(broker.pid))
    finally:
        consumer.close()
    rate = got / MB / (time.monotonic() - started)
    return (f"| consume {megabytes} MB (confluent-kafka, 512 KB records) | RSS "
            f"+{(peak - base) / 1024:.1f} MiB at most | {rate:.0f} MB/s |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default=None, help="run this git revision's odradek")
    parser.add_argument("--never-read", type=int, default=500)
    parser.add_argument("--topic-mb", type=int, default=205)
    parser.add_argument("--stalled", type=int, default=100)
    parser.add_argument("--consume-mb", type=int, default=1024)
    parser.add_argument("--only", default="never-read,stalled,consume")
    args = parser.parse_args(argv)
    src, name = None, "work tree"
    if args.rev:
        src, name = tools.odradek_snapshot(args.rev, ROOT)
    print(f"odradek {name}; load average {os.getloadavg()[0]:.1f}")
    print("| case | broker memory | other clients |\n|---|---|---|")
    runs = {"never-read": lambda b: never_read(b, args.never_read, args.topic_mb),
            "stalled": lambda b: stalled(b, args.stalled),
            "consume": lambda b: consume(b, args.consume_mb)}
    for case in args.only.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            broker = odradek_broker(Path(tmp), src=src)
            broker.start()
            try:
                time.sleep(1)  # start-up allocations settle before the baseline
                print(runs[case](broker), flush=True)
            finally:
                broker.stop()


if __name__ == "__main__":
    main()
