"""The memory pool on the Prometheus endpoint, under Kafka's SocketServer gauge names:
an operator sees the pool fill while a client holds a half-sent frame, and empty after."""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Callable

from tests.conftest import BrokerProcess, free_port
from tests.server.test_connection_memory import MB, round_trips

USED = "kafka_network_socketserver_memorypoolused"
AVAILABLE = "kafka_network_socketserver_memorypoolavailable"


def scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    values = {}
    for line in text.decode().splitlines():
        name, _, value = line.partition(" ")
        if name in (USED, AVAILABLE):
            values[name] = float(value)
    return values


def wait_until(port: int, ok: Callable[[dict[str, float]], bool]) -> dict[str, float]:
    deadline = time.monotonic() + 30
    while True:
        values = scrape(port)
        if ok(values):
            return values
        assert time.monotonic() < deadline, f"the pool gauges stayed at {values}"
        time.sleep(0.05)  # polling a state, not waiting for it


def test_the_pool_gauges_follow_a_half_sent_frame(fresh_broker: BrokerProcess) -> None:
    port = free_port()
    capacity = 8 * MB
    fresh_broker.overrides = {"metrics.port": str(port),
                              "socket.request.max.bytes": str(4 * MB),
                              "queued.max.request.bytes": str(capacity)}
    broker = fresh_broker.start()
    round_trips(broker, 5)
    idle = wait_until(port, lambda v: v.get(USED) == 0)
    assert idle[AVAILABLE] == capacity
    held = socket.create_connection(("127.0.0.1", broker.port))
    try:
        # a 3 MB frame is announced and 2 MB of it sent, then nothing: the broker holds
        # what arrived (taken as it arrived), not the 3 MB claimed
        held.sendall((3 * MB).to_bytes(4, "big") + b"\0" * (2 * MB))
        busy = wait_until(port, lambda v: v[USED] >= 2 * MB)
        assert busy[USED] <= 4 * MB, "memory is taken as bytes arrive, not on the claim"
        assert busy[AVAILABLE] == capacity - busy[USED]
    finally:
        held.close()
    after = wait_until(port, lambda v: v[USED] == 0)
    assert after[AVAILABLE] == capacity


def test_an_unbounded_pool_reports_kafkas_no_limit_and_still_counts(
        fresh_broker: BrokerProcess) -> None:
    port = free_port()
    fresh_broker.overrides = {"metrics.port": str(port), "queued.max.request.bytes": "-1"}
    broker = fresh_broker.start()
    # start() returns once the port takes connections (the kernel's backlog): an answer
    # shows the broker has started, its metrics endpoint with it
    round_trips(broker, 1)
    held = socket.create_connection(("127.0.0.1", broker.port))
    try:
        held.sendall((3 * MB).to_bytes(4, "big") + b"\0" * MB)
        busy = wait_until(port, lambda v: v[USED] >= MB)
        assert busy[AVAILABLE] == float(2**63 - 1)  # Long.MAX_VALUE, as MemoryPool.NONE
    finally:
        held.close()
    wait_until(port, lambda v: v[USED] == 0)
