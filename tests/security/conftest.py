"""A broker with every secured listener (SSL with client certificates, SASL_SSL with
SCRAM and PLAIN, SASL_PLAINTEXT) beside a PLAINTEXT one for set-up, one per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.security.certs import Bundle, write_bundle
from tests.conftest import BrokerProcess, free_port

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="alice-secret";')


class SecuredBroker:
    def __init__(self, broker: BrokerProcess, bundle: Bundle, ports: dict[str, int]) -> None:
        self.broker, self.bundle, self.ports = broker, bundle, ports

    def address(self, listener: str) -> str:
        return f"localhost:{self.ports[listener]}"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    base = tmp_path_factory.mktemp("secured")
    bundle = write_bundle(base / "tls", brokers=["localhost"], users=["alice"])
    ports = {name: free_port() for name in ("SSL", "SASL_SSL", "SASL_PLAINTEXT")}
    keystore = bundle.broker_properties("localhost")
    overrides = {
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        **{f"listener.name.ssl.{k}": v for k, v in keystore.items()},
        **{f"listener.name.sasl_ssl.{k}": v for k, v in keystore.items()
           if k != "ssl.client.auth"},
    }
    broker = BrokerProcess(base / "data", overrides=overrides)
    plaintext = broker.port
    overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{plaintext}," + overrides["listeners"]
    broker.start()
    try:
        yield SecuredBroker(broker, bundle, {"PLAINTEXT": plaintext, **ports})
    finally:
        broker.stop()
