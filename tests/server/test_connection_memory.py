"""Memory a client controls stays bounded (issue 21's goals as fault tests).

- a client that pipelines big fetches and never reads its socket costs the broker about
  one response (the records are sent from the files), and other clients keep their
  round trips;
- clients that announce huge frames and stall cost what they sent, not what they
  claimed, and a busy client keeps its round trips;
- a client that half-closes in the middle of a response is dropped, with nothing held;
- consuming a topic costs no memory that grows with the data read.

Each has a short version in the default run and a long one marked slow (issue 21's
sizes). Round trips are printed; docs/performance.md has the measured rows.
"""

from __future__ import annotations

import contextlib
import datetime
import socket
import statistics
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from odradek.protocol.messages import encode_request, request_class
from tests.clients.test_confluent_kafka import create_topic
from tests.conftest import BrokerProcess
from tests.wire import WireClient

MB = 1024 * 1024


def rss_mb(broker: BrokerProcess) -> float:
    assert broker.proc is not None
    for line in Path(f"/proc/{broker.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def round_trips(broker: BrokerProcess, rounds: int = 20) -> list[float]:
    """Another client's ApiVersions round trips, in ms (it is served meanwhile)."""
    out = []
    with WireClient(broker.bootstrap, timeout=10) as w:
        for _ in range(rounds):
            t = time.perf_counter()
            assert w.call(18, 3, client_software_name="t", client_software_version="1")
            out.append((time.perf_counter() - t) * 1000)
    return out


def p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98] if len(samples) > 1 else samples[0]


def fill(broker: BrokerProcess, topic: str, megabytes: int) -> None:
    create_topic(broker.bootstrap, topic, partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20,
                         "message.max.bytes": 2 * MB})
    value = b"x" * (512 * 1024)
    for _ in range(2 * megabytes):
        producer.produce(topic, value)
        producer.poll(0)
    assert producer.flush(60) == 0


def fetch_request(topic: str, correlation: int) -> bytes:
    schema = request_class(1, 4)
    module = sys.modules[schema.__module__]
    fetch = schema(
        replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=50 * MB,
        isolation_level=0, topics=(module.FetchTopic(topic=topic, partitions=(
            module.FetchPartition(partition=0, fetch_offset=0,
                                  partition_max_bytes=50 * MB),)),))
    return encode_request(1, 4, correlation, "hog", fetch)


def never_reading_client(broker: BrokerProcess, topic_mb: int, requests: int,
                         strict: bool) -> None:
    fill(broker, "big", topic_mb)
    round_trips(broker, 5)
    before, quiet = rss_mb(broker), round_trips(broker, 200)
    hog = socket.create_connection(("127.0.0.1", broker.port))
    try:
        hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        hog.setblocking(False)
        pending = b"".join(fetch_request("big", c) for c in range(requests))
        sent = 0
        busy: list[float] = []
        deadline = time.monotonic() + 120
        while (sent < len(pending) and time.monotonic() < deadline) or len(busy) < 200:
            # BlockingIOError: the broker stopped reading it, and answers others meanwhile
            with contextlib.suppress(BlockingIOError):
                sent += hog.send(pending[sent:])
            busy += round_trips(broker, 10)
        assert sent == len(pending), "the broker never took the requests in"
        grown = rss_mb(broker) - before
        print(f"\n{requests} fetches of 50 MB never read: RSS +{grown:.1f} MB, other "
              f"client p99 {p99(quiet):.2f} ms before, {p99(busy):.2f} ms during")
        assert grown < 64, f"RSS grew {grown:.0f} MB for a client that never reads"
        if strict:  # within 20% as issue 21 asks, plus 5 ms for a shared machine's noise
            assert p99(busy) <= 1.2 * p99(quiet) + 5
        else:  # served meanwhile; the 20% goal is bench/memory_bench.py's to measure
            assert p99(busy) <= 3 * p99(quiet) + 50
    finally:
        hog.close()
    round_trips(broker, 5)


def test_a_client_that_never_reads_costs_about_one_response(
        fresh_broker: BrokerProcess) -> None:
    never_reading_client(fresh_broker.start(), topic_mb=70, requests=50, strict=False)


@pytest.mark.slow
def test_500_fetches_of_50_mb_never_read_cost_about_one_response(
        fresh_broker: BrokerProcess) -> None:
    never_reading_client(fresh_broker.start(), topic_mb=205, requests=500, strict=True)


def stalled_frames(broker: BrokerProcess, connections: int, p99_bound_ms: float) -> None:
    round_trips(broker, 5)
    before = rss_mb(broker)
    stalled = []
    try:
        for _ in range(connections):
            s = socket.create_connection(("127.0.0.1", broker.port))
            # a 100 MB frame is announced; 100 KB of it is sent; then nothing
            s.sendall((100 * MB - 1).to_bytes(4, "big") + b"\0" * (100 * 1024))
            stalled.append(s)
        busy = round_trips(broker, 300)
        grown = rss_mb(broker) - before
        print(f"\n{connections} stalled 100 MB frames: RSS +{grown:.1f} MB, busy client "
              f"p99 {p99(busy):.2f} ms")
        assert grown < 64, f"RSS grew {grown:.0f} MB for {connections} stalled frames"
        assert p99(busy) < p99_bound_ms
    finally:
        for s in stalled:
            s.close()
    round_trips(broker, 5)


def test_announced_frames_that_never_arrive_cost_what_was_sent(
        fresh_broker: BrokerProcess) -> None:
    stalled_frames(fresh_broker.start(), 100, p99_bound_ms=100)


@pytest.mark.slow
def test_100_stalled_100_mb_frames_leave_a_busy_client_under_20_ms(
        fresh_broker: BrokerProcess) -> None:
    stalled_frames(fresh_broker.start(), 100, p99_bound_ms=20)


def test_a_full_memory_pool_mutes_a_large_request_until_memory_returns(
        fresh_broker: BrokerProcess) -> None:
    broker = fresh_broker
    broker.overrides = {"socket.request.max.bytes": str(2 * MB),
                        "queued.max.request.bytes": str(2 * MB)}
    broker.start()
    stalled = []
    try:
        for _ in range(4):  # 4 half-sent 1 MB frames: 2 MB of the pool
            s = socket.create_connection(("127.0.0.1", broker.port))
            s.sendall((MB).to_bytes(4, "big") + b"\0" * (600 * 1024))
            stalled.append(s)
        with WireClient(broker.bootstrap, timeout=30) as big:
            # a 1 MB request (ApiVersions with a long software name) needs the pool
            frame = bytearray(big.framing.build(18, 3, client_software_name="t",
                                                client_software_version="1")[1])
            padded = (len(frame) - 4 + MB // 2).to_bytes(4, "big") + frame[4:] + \
                b"\0" * (MB // 2)
            big.sock.settimeout(1.0)
            big.send_raw(padded)
            with pytest.raises(TimeoutError):
                big.read_frame()  # muted: the pool is full (as is every connection)
            for s in stalled:
                s.close()
            stalled.clear()
            big.sock.settimeout(30)
            assert big.read_frame()  # memory came back: read and answered
    finally:
        for s in stalled:
            s.close()


def test_a_client_that_half_closes_mid_response_is_dropped(
        fresh_broker: BrokerProcess) -> None:
    broker = fresh_broker.start()
    fill(broker, "big", 30)
    round_trips(broker, 5)
    before = rss_mb(broker)
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", broker.port))
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            s.sendall(fetch_request("big", 1) * 3)
            assert s.recv(1000)  # the response has begun
            s.shutdown(socket.SHUT_WR)  # then the client half-closes
            s.settimeout(30)
            try:
                while s.recv(1 << 20):  # the broker ends the connection
                    pass
            except ConnectionResetError:
                pass
        finally:
            s.close()
    busy = round_trips(broker, 50)
    grown = rss_mb(broker) - before
    print(f"\n20 half-closed mid-response: RSS +{grown:.1f} MB, p99 {p99(busy):.2f} ms")
    assert grown < 64


def consume_everything(broker: BrokerProcess, megabytes: int) -> float:
    fill(broker, "data", megabytes)
    round_trips(broker, 5)
    before, peak = rss_mb(broker), 0.0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "fetch.max.bytes": 50 * MB, "max.partition.fetch.bytes": 10 * MB,
                         "fetch.message.max.bytes": 10 * MB})
    consumer.subscribe(["data"])
    got, started = 0, time.monotonic()
    try:
        while got < megabytes * MB:
            for m in consumer.consume(100, 1.0):
                assert m.error() is None
                got += len(m.value() or b"")
            peak = max(peak, rss_mb(broker))
    finally:
        consumer.close()
    rate = got / MB / (time.monotonic() - started)
    print(f"\nconsumed {got / MB:.0f} MB at {rate:.0f} MB/s: broker RSS +"
          f"{peak - before:.1f} MB at most")
    assert peak - before < 100
    return rate


def test_consuming_a_topic_costs_no_memory_that_grows_with_it(
        fresh_broker: BrokerProcess) -> None:
    consume_everything(fresh_broker.start(), 100)


@pytest.mark.slow
def test_consuming_1_gb_grows_rss_under_100_mb(fresh_broker: BrokerProcess) -> None:
    consume_everything(fresh_broker.start(), 1024)
