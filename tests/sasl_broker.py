"""A broker with a PLAINTEXT listener and a SASL_PLAINTEXT one (PLAIN, users admin, alice
and bob, each with the password `<name>-secret`): the ACL and quota tests' broker."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import BrokerProcess, free_port

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="alice-secret" user_bob="bob-secret";')
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
}


@contextlib.contextmanager
def plain_sasl_broker(data_dir: Path, **overrides: str) -> Iterator[tuple[BrokerProcess, int]]:
    """The started broker and its SASL_PLAINTEXT port; stopped on leaving."""
    sasl_port = free_port()
    process = BrokerProcess(data_dir, overrides={
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        **overrides,
    })
    process.overrides["listeners"] = (f"PLAINTEXT://127.0.0.1:{process.port},"
                                      f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}")
    process.start()
    try:
        yield process, sasl_port
    finally:
        process.stop()
