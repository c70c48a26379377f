"""Secured listeners on a real broker, with real clients: TLS with client certificates,
SASL/SCRAM-SHA-512 over TLS, SASL/PLAIN — and the refusals a wrong password, a missing
certificate or an untrusted one get."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from odradek.security.certs import client_cert, make_ca
from tests.security.conftest import SecuredBroker


def _roundtrip(config: dict[str, Any], topic: str, value: bytes) -> list[bytes]:
    producer = Producer({**config, "message.timeout.ms": 15000})
    producer.produce(topic, value)
    assert producer.flush(20) == 0
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = consumer.consume(1, timeout=20)
        return [m.value() for m in got if m.error() is None]
    finally:
        consumer.close()


def _create(secured: SecuredBroker, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": secured.address("PLAINTEXT")})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)


def test_ssl_with_a_client_certificate(secured: SecuredBroker) -> None:
    _create(secured, "tls-topic")
    config = {"bootstrap.servers": secured.address("SSL"),
              **secured.bundle.client_properties("alice")}
    assert _roundtrip(config, "tls-topic", b"over tls") == [b"over tls"]


def _refused(config: dict[str, Any]) -> str:
    """The error a client gets when the broker will not have it."""
    errors: list[str] = []
    admin = AdminClient({**config, "error_cb": lambda e: errors.append(str(e))})
    with pytest.raises(KafkaException) as failed:
        admin.list_topics(timeout=8)
    return str(failed.value) + " ".join(errors)


def test_ssl_refuses_a_missing_or_untrusted_client_certificate(
        secured: SecuredBroker, tmp_path: Path) -> None:
    props = secured.bundle.client_properties("alice")
    no_cert = {k: v for k, v in props.items() if "certificate" not in k and ".key." not in k}
    _refused({"bootstrap.servers": secured.address("SSL"), **no_cert})
    stranger = client_cert(make_ca(), "mallory")
    stranger.write_pem(tmp_path, "mallory")
    _refused({"bootstrap.servers": secured.address("SSL"), **props,
              "ssl.certificate.location": str(tmp_path / "mallory.crt"),
              "ssl.key.location": str(tmp_path / "mallory.key")})
    # the broker keeps serving the others
    assert secured.broker.alive()


def test_scram_sha_512_over_sasl_ssl(secured: SecuredBroker) -> None:
    admin = AdminClient({"bootstrap.servers": secured.address("PLAINTEXT")})
    upsert = UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"carol-secret")
    for fut in admin.alter_user_scram_credentials([upsert]).values():
        fut.result(15)
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(15)
    assert described.scram_credential_infos[0].iterations == 8192
    _create(secured, "scram-topic")
    config = {"bootstrap.servers": secured.address("SASL_SSL"),
              "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
              "sasl.username": "carol", "sasl.password": "carol-secret",
              "ssl.ca.location": str(secured.bundle.ca_path)}
    assert _roundtrip(config, "scram-topic", b"scram") == [b"scram"]
    _refused({**config, "sasl.password": "guess"})
    logs = secured.broker.logs()
    assert "Failed authentication" in logs and "SCRAM-SHA-512" in logs
    assert "guess" not in logs and "carol-secret" not in logs  # no secret is ever logged


def test_plain_with_kafka_python_and_confluent(secured: SecuredBroker) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    _create(secured, "plain-topic")
    common = {"bootstrap_servers": secured.address("SASL_PLAINTEXT"),
              "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
              "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}
    producer = KafkaProducer(**common)
    producer.send("plain-topic", b"kafka-python").get(timeout=20)
    producer.close()
    consumer = KafkaConsumer("plain-topic", auto_offset_reset="earliest",
                             consumer_timeout_ms=15000, **common)
    try:
        assert next(iter(consumer)).value == b"kafka-python"
    finally:
        consumer.close()
    config = {"bootstrap.servers": secured.address("SASL_PLAINTEXT"),
              "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
              "sasl.username": "alice", "sasl.password": "nope"}
    _refused(config)


def test_requests_before_authentication_close_the_connection(secured: SecuredBroker) -> None:
    from tests.wire import WireClient

    with WireClient(secured.address("SASL_PLAINTEXT")) as w:
        assert w.call(18, 3, client_software_name="t", client_software_version="1")
        with pytest.raises((ConnectionError, OSError)):
            w.call(3, 12, topics=None, allow_auto_topic_creation=False,
                   include_topic_authorized_operations=False)
    assert secured.broker.alive()
