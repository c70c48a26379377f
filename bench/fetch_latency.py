"""One consumer's Fetch round trips on a raw socket: what the broker costs per fetch.

A topic of one partition gets N records of 100 B; then one connection sends Fetch v4
requests one after another (each waits for its whole answer) for 1 MiB of the
partition at offsets spread over it, and prints MB/s and the round trip's p50/p99.
No client library sits in between, so this is the broker's own cost per response
(for a Fetch: the read and the send of its records).

    python -m bench.fetch_latency [--rev REV] [--records 300000] [--fetches 200]
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench import tools
from bench.brokers import odradek_broker
from odradek.protocol.messages import encode_request, request_class

MB = 1 << 20
ROOT = Path(__file__).resolve().parent.parent


def _recv_frame(s: socket.socket) -> int:
    head = b""
    while len(head) < 4:
        head += s.recv(4 - len(head))
    size, got = int.from_bytes(head, "big"), 0
    while got < size:
        chunk = s.recv(min(size - got, MB))
        if not chunk:
            raise ConnectionError("closed")
        got += len(chunk)
    return size


def measure(port: int, records: int, fetches: int) -> tuple[float, float, float, float]:
    bootstrap = f"127.0.0.1:{port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50,
                         "batch.size": 1_000_000})
    for i in range(records):
        producer.produce("t", b"x" * 100)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(60)
    schema = request_class(1, 4)
    m = sys.modules[schema.__module__]
    trips, total = [], 0
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        started = time.perf_counter()
        for c in range(fetches):
            offset = (c * 9_001) % max(records - 10_000, 1)
            request = encode_request(1, 4, c, "bench", schema(
                replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1,
                max_bytes=50 * MB, isolation_level=0, topics=(m.FetchTopic(
                    topic="t", partitions=(m.FetchPartition(
                        partition=0, fetch_offset=offset, partition_max_bytes=MB),)),)))
            t = time.perf_counter()
            s.sendall(request)
            total += _recv_frame(s)
            trips.append((time.perf_counter() - t) * 1000)
        elapsed = time.perf_counter() - started
    trips.sort()
    return (total / MB / elapsed, statistics.median(trips),
            trips[int(0.99 * (len(trips) - 1))], total / fetches / 1024)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default=None, help="run this git revision's odradek")
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--fetches", type=int, default=200)
    args = parser.parse_args(argv)
    src, name = None, "work tree"
    if args.rev:
        src, name = tools.odradek_snapshot(args.rev, ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        broker = odradek_broker(Path(tmp), src=src)
        broker.start()
        try:
            rate, p50, p99, size = measure(broker.port, args.records, args.fetches)
        finally:
            broker.stop()
    print(f"odradek {name}, load {os.getloadavg()[0]:.1f}: {rate:.0f} MB/s, Fetch round "
          f"trip p50 {p50:.2f} ms, p99 {p99:.2f} ms, {size:.0f} KiB a response")


if __name__ == "__main__":
    main()
