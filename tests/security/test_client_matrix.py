"""The configs people already have for a secured Kafka, pointed at odradek: aiokafka,
kafka-python, KafkaJS and Debian's kcat (librdkafka 2.0.2) each produce and consume over
SASL_SSL with SCRAM-SHA-512, and over SSL with a client certificate; a wrong password is
refused for each. (confluent-kafka's own rows are in test_broker_listeners.py.)"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.clients.test_kafkajs import kafkajs
from tests.security.conftest import SecuredBroker

USER, PASSWORD = "dora", "dora-secret"


@pytest.fixture(scope="module")
def scram_user(secured: SecuredBroker) -> Iterator[SecuredBroker]:
    admin = AdminClient({"bootstrap.servers": secured.address("PLAINTEXT")})
    upsert = UserScramCredentialUpsertion(
        USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode())
    for fut in admin.alter_user_scram_credentials([upsert]).values():
        fut.result(15)
    yield secured


def _topic(secured: SecuredBroker, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": secured.address("PLAINTEXT")})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
    return name


def _tls_context(secured: SecuredBroker, with_cert: bool) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(secured.bundle.ca_path))
    if with_cert:
        cert, key = secured.bundle.user_certs["alice"]
        context.load_cert_chain(str(cert), str(key))
    return context


# ---- aiokafka ------------------------------------------------------------------------

async def _aiokafka_roundtrip(topic: str, **common: Any) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    producer = AIOKafkaProducer(**common)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"aiokafka")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **common)
    await consumer.start()
    try:
        record = await asyncio.wait_for(consumer.getone(), 30)
        return [record.value]
    finally:
        await consumer.stop()


def test_aiokafka_over_sasl_ssl_scram_and_ssl_with_a_certificate(
        scram_user: SecuredBroker) -> None:
    from aiokafka.errors import KafkaError

    secured = scram_user
    topic = _topic(secured, "matrix-aiokafka-scram")
    scram = {"bootstrap_servers": secured.address("SASL_SSL"),
             "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
             "sasl_plain_username": USER, "sasl_plain_password": PASSWORD,
             "ssl_context": _tls_context(secured, with_cert=False)}
    assert asyncio.run(_aiokafka_roundtrip(topic, **scram)) == [b"aiokafka"]
    topic = _topic(secured, "matrix-aiokafka-tls")
    tls = {"bootstrap_servers": secured.address("SSL"), "security_protocol": "SSL",
           "ssl_context": _tls_context(secured, with_cert=True)}
    assert asyncio.run(_aiokafka_roundtrip(topic, **tls)) == [b"aiokafka"]
    with pytest.raises(KafkaError):
        asyncio.run(_aiokafka_roundtrip(topic, **{**scram, "sasl_plain_password": "guess"}))


# ---- kafka-python --------------------------------------------------------------------

def test_kafka_python_over_sasl_ssl_scram_and_ssl_with_a_certificate(
        scram_user: SecuredBroker) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import KafkaError

    secured = scram_user
    cert, key = secured.bundle.user_certs["alice"]
    configs = {
        "matrix-kp-scram": {"bootstrap_servers": secured.address("SASL_SSL"),
                            "security_protocol": "SASL_SSL",
                            "sasl_mechanism": "SCRAM-SHA-512",
                            "sasl_plain_username": USER, "sasl_plain_password": PASSWORD,
                            "ssl_cafile": str(secured.bundle.ca_path)},
        "matrix-kp-tls": {"bootstrap_servers": secured.address("SSL"),
                          "security_protocol": "SSL", "ssl_cafile": str(secured.bundle.ca_path),
                          "ssl_certfile": str(cert), "ssl_keyfile": str(key)},
    }
    for name, common in configs.items():
        topic = _topic(secured, name)
        producer = KafkaProducer(**common)
        producer.send(topic, b"kafka-python").get(timeout=30)
        producer.close()
        consumer = KafkaConsumer(topic, auto_offset_reset="earliest",
                                 consumer_timeout_ms=30000, **common)
        try:
            assert next(iter(consumer)).value == b"kafka-python"
        finally:
            consumer.close()
    with pytest.raises(KafkaError):
        KafkaProducer(**{**configs["matrix-kp-scram"], "sasl_plain_password": "guess",
                         "max_block_ms": 10000}).send("matrix-kp-scram", b"x").get(10)


# ---- KafkaJS -------------------------------------------------------------------------

def test_kafkajs_over_sasl_ssl_scram_and_ssl_with_a_certificate(
        scram_user: SecuredBroker) -> None:
    secured = scram_user
    ca = str(secured.bundle.ca_path)
    cert, key = secured.bundle.user_certs["alice"]
    for listener, security in [
        ("SASL_SSL", {"ssl": {"ca": ca}, "sasl": {"mechanism": "scram-sha-512",
                                                  "username": USER, "password": PASSWORD}}),
        ("SSL", {"ssl": {"ca": ca, "cert": str(cert), "key": str(key)}}),
    ]:
        out = kafkajs("produce", secured.address(listener), f"matrix-kafkajs-{listener}",
                      "none", security=security)
        assert sorted(m["value"] for m in out["got"]) == sorted(f"v{i}" for i in range(30))
    with pytest.raises(AssertionError, match="SASL"):
        kafkajs("produce", secured.address("SASL_SSL"), "matrix-kafkajs-refused", "none",
                security={"ssl": {"ca": ca}, "sasl": {"mechanism": "scram-sha-512",
                                                      "username": USER, "password": "guess"}})


# ---- kcat (librdkafka 2.0.2) ---------------------------------------------------------

def _kcat(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    if shutil.which("kcat") is None:
        pytest.fail("kcat is missing: run `make test` (it installs Debian's kcat)")
    return subprocess.run(["kcat", *args], input=stdin, capture_output=True, text=True,
                          timeout=60)


def test_kcat_over_sasl_ssl_scram_and_ssl_with_a_certificate(
        scram_user: SecuredBroker) -> None:
    secured = scram_user
    ca = str(secured.bundle.ca_path)
    cert, key = secured.bundle.user_certs["alice"]
    scram = ["-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
             "-X", f"sasl.username={USER}", "-X", f"sasl.password={PASSWORD}",
             "-X", f"ssl.ca.location={ca}"]
    tls = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={ca}",
           "-X", f"ssl.certificate.location={cert}", "-X", f"ssl.key.location={key}"]
    for listener, flags in [("SASL_SSL", scram), ("SSL", tls)]:
        topic = _topic(secured, f"matrix-kcat-{listener}")
        bootstrap = secured.address(listener)
        produced = _kcat("-P", "-b", bootstrap, "-t", topic, *flags, stdin="kcat-record\n")
        assert produced.returncode == 0, produced.stderr
        consumed = _kcat("-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e",
                         "-f", "%s\n", *flags)
        assert consumed.returncode == 0, consumed.stderr
        assert consumed.stdout.splitlines() == ["kcat-record"]
    refused = _kcat("-L", "-b", secured.address("SASL_SSL"), "-m", "10",
                    *[f if "sasl.password" not in f else "sasl.password=guess" for f in scram])
    assert refused.returncode != 0
    assert "Authentication failed" in refused.stderr or "SASL" in refused.stderr


# ---- SaslHandshake v0: raw token frames (clients older than KIP-152) -----------------

def test_sasl_handshake_v0_takes_raw_token_frames(secured: SecuredBroker) -> None:
    from tests.wire import WireClient

    with WireClient(secured.address("SASL_PLAINTEXT")) as w:
        versions = w.call(18, 3, client_software_name="t", client_software_version="1")
        handshake = next(k for k in versions.api_keys if k.api_key == 17)
        assert (handshake.min_version, handshake.max_version) == (0, 1)
        assert w.call(17, 0, mechanism="PLAIN").error_code == 0
        w.send_raw(_framed(b"\0alice\0alice-secret"))
        assert w.read_frame() == b""  # PLAIN's server answer: no bytes
        # authenticated: ordinary requests are served on the same connection
        metadata = w.call(3, 12, topics=None, allow_auto_topic_creation=False,
                          include_topic_authorized_operations=False)
        assert metadata.brokers
    with WireClient(secured.address("SASL_PLAINTEXT")) as w:
        assert w.call(17, 0, mechanism="PLAIN").error_code == 0
        w.send_raw(_framed(b"\0alice\0guess"))
        with pytest.raises((ConnectionError, OSError)):
            w.read_frame()  # a failed v0 login closes the connection
    assert secured.broker.alive()


def _framed(token: bytes) -> bytes:
    return len(token).to_bytes(4, "big") + token
