"""Memory a client controls stays bounded: a client that pipelines big fetches and never
reads its socket costs the broker about one response; a client that announces huge
frames and stalls costs a small first chunk each; other clients are served meanwhile."""

from __future__ import annotations

import datetime
import socket
import sys
import time
from pathlib import Path

from confluent_kafka import Producer

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


def _served(broker: BrokerProcess, rounds: int = 20) -> None:
    """Another client's requests are answered (the broker is not stuck on the hog)."""
    with WireClient(broker.bootstrap, timeout=10) as w:
        for _ in range(rounds):
            assert w.call(18, 3, client_software_name="t", client_software_version="1")


def test_a_client_that_never_reads_costs_about_one_response(
        fresh_broker: BrokerProcess) -> None:
    broker = fresh_broker.start()
    create_topic(broker.bootstrap, "big", partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20,
                         "message.max.bytes": 2 * MB})
    value = b"x" * (512 * 1024)
    for _ in range(120):  # 60 MB
        producer.produce("big", value)
        producer.poll(0)
    assert producer.flush(30) == 0
    _served(broker, 5)
    before = rss_mb(broker)
    schema = request_class(1, 4)
    module = sys.modules[schema.__module__]
    fetch = schema(
        replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=50 * MB,
        isolation_level=0, topics=(module.FetchTopic(topic="big", partitions=(
            module.FetchPartition(partition=0, fetch_offset=0,
                                  partition_max_bytes=50 * MB),)),))
    hog = socket.create_connection(("127.0.0.1", broker.port))
    try:
        hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        for correlation in range(40):
            hog.sendall(encode_request(1, 4, correlation, "hog", fetch))
        _served(broker)  # the broker has read the hog's requests and answers others
        grown = rss_mb(broker) - before
        assert grown < 160, f"RSS grew {grown:.0f} MB for a client that never reads"
    finally:
        hog.close()
    _served(broker, 5)


def test_announced_frames_that_never_arrive_cost_a_small_chunk(
        fresh_broker: BrokerProcess) -> None:
    broker = fresh_broker.start()
    _served(broker, 5)
    before = rss_mb(broker)
    stalled = []
    try:
        for _ in range(50):
            s = socket.create_connection(("127.0.0.1", broker.port))
            # a 100 MB frame is announced; 300 KB of it is sent; then nothing
            s.sendall((100 * MB - 1).to_bytes(4, "big") + b"\0" * (300 * 1024))
            stalled.append(s)
        _served(broker)
        deadline = time.monotonic() + 30
        while rss_mb(broker) - before < 1 and time.monotonic() < deadline:
            _served(broker, 1)  # until the broker has taken the bytes in
        grown = rss_mb(broker) - before
        assert grown < 64, f"RSS grew {grown:.0f} MB for 50 stalled 100 MB frames"
    finally:
        for s in stalled:
            s.close()
    _served(broker, 5)
