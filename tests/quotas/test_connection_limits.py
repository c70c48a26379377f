"""Connection limits on a real broker: a flood of idle or slow raw connections is
held to max.connections.per.ip / max.connections, refused connections are closed at
once and logged a few times (not once each), idle and trickling connections are closed
after connections.max.idle.ms, max.connection.creation.rate spaces new connections
out — and a real client (confluent-kafka) keeps being served throughout."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from odradek.protocol.client_framing import ClientFraming
from tests.conftest import BrokerProcess
from tests.wire import WireClient


def _connect(broker: BrokerProcess, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.settimeout(10)
    sock.connect(("127.0.0.1", broker.port))
    return sock


def _closed_by_broker(sock: socket.socket, within: float) -> bool:
    """True when the broker closes the socket within `within` seconds (state, not time:
    recv returns at once when it does)."""
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _api_versions(sock: socket.socket) -> bool:
    """One ApiVersions round trip on a raw socket."""
    _, request = ClientFraming("limits-test").build(18, 3, client_software_name="t",
                                                    client_software_version="1")
    try:
        sock.sendall(request)
        return len(sock.recv(4)) == 4
    except OSError:
        return False


def _produce_ok(broker: BrokerProcess, topic: str) -> bool:
    outcome: list[object] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 15000})
    producer.produce(topic, b"v", on_delivery=lambda err, _m: outcome.append(err))
    producer.flush(20)
    return outcome == [None]


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", overrides={
        "max.connections.per.ip": "50",
        "max.connections.per.ip.overrides": "127.0.0.2:5",
        "connections.max.idle.ms": "1500",
        "auto.create.topics.enable": "true"}).start()
    try:
        yield process
    finally:
        process.stop()


def test_a_flood_from_one_address_is_held_to_its_limit_and_others_are_served(
        limited: BrokerProcess) -> None:
    flood = [_connect(limited, "127.0.0.2") for _ in range(40)]
    try:
        kept = flood[:5]
        assert all(_api_versions(s) for s in kept)  # the first five are served
        refused = [_closed_by_broker(s, 5) for s in flood[5:]]
        assert all(refused)
        # the client on another address is served while the flood holds its five
        assert _produce_ok(limited, "served")
        logged = limited.logs().count("Rejected connection from 127.0.0.2")
        assert 1 <= logged <= 6, logged  # rate-limited: 35 refusals, a few lines
    finally:
        for s in flood:
            s.close()


def test_idle_and_trickling_connections_are_closed_after_the_idle_time(
        limited: BrokerProcess) -> None:
    idle = [_connect(limited, "127.0.0.2") for _ in range(5)]
    trickle = _connect(limited)
    try:
        started = time.monotonic()
        # a frame that never completes: one byte of its size at a time
        for b in b"\x00\x00\x10":
            trickle.sendall(bytes([b]))
            assert not _closed_by_broker(trickle, 0.3)
        assert all(_closed_by_broker(s, 10) for s in idle)
        assert _closed_by_broker(trickle, 10)
        assert time.monotonic() - started >= 1.0  # not before connections.max.idle.ms
        # the address's slots are free again
        again = _connect(limited, "127.0.0.2")
        assert _api_versions(again)
        again.close()
    finally:
        for s in [*idle, trickle]:
            s.close()


def test_max_connections_closes_the_extra_ones_at_once(tmp_path: Path) -> None:
    process = BrokerProcess(tmp_path / "data", overrides={"max.connections": "4"}).start()
    try:
        held = [WireClient(process.bootstrap) for _ in range(4)]
        extra = _connect(process)
        assert _closed_by_broker(extra, 5)
        extra.close()
        held.pop().close()
        with WireClient(process.bootstrap) as client:  # a freed slot is taken again
            assert client.call(18, 3, client_software_name="t",
                               client_software_version="1").error_code == 0
        for h in held:
            h.close()
    finally:
        process.stop()


def test_connection_creation_rate_spaces_new_connections_out(tmp_path: Path) -> None:
    process = BrokerProcess(tmp_path / "data", overrides={
        "max.connection.creation.rate": "10", "quota.window.num": "2"}).start()
    socks: list[socket.socket] = []
    try:
        started = time.monotonic()
        socks = [_connect(process) for _ in range(40)]
        answered = []
        for s in socks:  # every one is served, the later ones after a wait
            assert _api_versions(s)
            answered.append(time.monotonic() - started)
        # 40 connections at 10 per second (one second's burst): about 3 s for the last
        assert answered[-1] >= 1.5, answered
        assert answered[0] < 1.0, answered
    finally:
        for s in socks:
            s.close()
        process.stop()
