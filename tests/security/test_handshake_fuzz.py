"""Mutated TLS and SASL handshakes at a live broker's secured listeners: garbage
ClientHellos, truncated and flipped ones, SASL exchanges out of order, mutated SCRAM and
PLAIN tokens, raw v0 token frames of any bytes. The broker stays up, answers its other
clients meanwhile, and a real client still logs in afterwards."""

from __future__ import annotations

import contextlib
import random
import socket
import ssl
import time

from confluent_kafka.admin import AdminClient

from odradek.protocol.messages import encode_request, request_class
from tests.security.conftest import SecuredBroker
from tests.server.test_fuzz import _mutate
from tests.server.test_fuzz_at_scale import Prober, _fire

ROUNDS = 1_500


def _client_hello() -> bytes:
    """The first flight of a real TLS client (Python's ssl, as librdkafka's OpenSSL)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with contextlib.suppress(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    kind = rng.randrange(4)
    if kind == 0:
        for _ in range(rng.randint(1, 16)):
            out[rng.randrange(len(out))] = rng.randrange(256)
    elif kind == 1:
        out = out[:rng.randrange(1, len(out))]
    elif kind == 2:
        out = bytearray(rng.randbytes(rng.randint(1, 600)))
    else:  # a record or handshake length claiming the most it can
        at = rng.choice([3, 6, 7]) if len(out) > 8 else 0
        out[at:at + 2] = b"\xff\xff"
    return bytes(out)


def _sasl_frames(rng: random.Random) -> list[bytes]:
    """A SASL conversation with one step mutated: handshakes, tokens, raw v0 frames."""
    mechanism = rng.choice(["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256", "OAUTHBEARER",
                            "GSSAPI", "", "P" * 300, "pl\x00ain"])
    version = rng.choice([0, 1])
    token = rng.choice([b"\0alice\0alice-secret", b"n,,n=alice,r=" + rng.randbytes(24),
                        b"c=biws,r=x,p=" + rng.randbytes(40), b"n,,\x01auth=Bearer x\x01\x01",
                        rng.randbytes(rng.randint(0, 300))])
    frames = [
        encode_request(18, 3, 1, "fuzz", request_class(18, 3)(
            client_software_name="fuzz", client_software_version="1")),
        encode_request(17, version, 2, "fuzz", request_class(17, version)(mechanism=mechanism)),
        len(token).to_bytes(4, "big") + token if version == 0 else
        encode_request(36, 2, 3, "fuzz", request_class(36, 2)(auth_bytes=token)),
        encode_request(3, 12, 4, "fuzz", request_class(3, 12)(
            topics=None, allow_auto_topic_creation=False,
            include_topic_authorized_operations=False)),
    ]
    victim = rng.randrange(len(frames))
    if rng.random() < 0.5:
        frames[victim] = _mutate(rng, frames[victim])
    else:  # out of order
        rng.shuffle(frames)
    return frames


def _address(secured: SecuredBroker, listener: str) -> tuple[str, int]:
    return ("127.0.0.1", secured.ports[listener])


def test_mutated_tls_and_sasl_handshakes_leave_the_broker_serving(
        secured: SecuredBroker) -> None:
    rng = random.Random(4242)
    hello = _client_hello()
    assert hello[:1] == b"\x16"  # a TLS handshake record
    prober = Prober(secured.address("PLAINTEXT"))
    prober.start()
    started = time.monotonic()
    for _ in range(ROUNDS):
        for listener in ("SSL", "SASL_SSL"):
            with socket.create_connection(_address(secured, listener), timeout=5) as s:
                try:
                    s.sendall(_mutate_bytes(rng, hello))
                    s.shutdown(socket.SHUT_WR)
                    s.settimeout(1.0)
                    while s.recv(65536):
                        pass
                except OSError:
                    pass
        _fire(_address(secured, "SASL_PLAINTEXT"), _sasl_frames(rng))
    elapsed = time.monotonic() - started
    prober.stopped.set()
    prober.join(30)
    assert secured.broker.alive(), secured.broker.logs()
    assert prober.error is None and prober.rounds > 0, prober.error
    assert prober.slowest < 1.0, f"another client waited {prober.slowest:.2f}s"
    # real logins still work on every secured listener
    plain = {"bootstrap.servers": secured.address("SASL_PLAINTEXT"),
             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.username": "alice", "sasl.password": "alice-secret"}
    tls = {"bootstrap.servers": secured.address("SSL"),
           **secured.bundle.client_properties("alice")}
    for config in (plain, tls):
        assert AdminClient(config).list_topics(timeout=15).brokers
    logs = secured.broker.logs()
    assert "alice-secret" not in logs  # not even a mutated token's secret
    print(f"\n{ROUNDS * 3} mutated handshakes in {elapsed:.1f}s; slowest other request "
          f"{prober.slowest * 1000:.0f} ms")
