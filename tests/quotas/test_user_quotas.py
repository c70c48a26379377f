"""User quotas over SASL with ACLs on: AlterClientQuotas needs ALTER_CONFIGS and
DescribeClientQuotas DESCRIBE_CONFIGS on the CLUSTER (CLUSTER_AUTHORIZATION_FAILED
otherwise, nothing changed); a `user=alice` quota throttles alice's producer (librdkafka
reports the throttle) and leaves bob's alone on the same broker."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.conftest import BrokerProcess
from tests.quotas.test_client_quotas_admin import Quotas
from tests.sasl_broker import AUTHORIZER, plain_sasl_broker

CLUSTER_AUTHORIZATION_FAILED = 31


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    with plain_sasl_broker(tmp_path_factory.mktemp("user-quotas") / "data", **AUTHORIZER,
                           **{"quota.window.num": "4"}) as started:
        yield started


def _quotas(port: int, user: str) -> Quotas:
    return Quotas(f"127.0.0.1:{port}", security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism="PLAIN", sasl_plain_username=user,
                  sasl_plain_password=f"{user}-secret")


def _client(port: int, user: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user,
            "sasl.password": f"{user}-secret", **extra}


def test_quota_apis_need_cluster_config_permissions(secured: tuple[BrokerProcess, int]) -> None:
    _, port = secured
    alice = _quotas(port, "alice")
    try:
        code, _ = alice.alter({"user": "alice"}, {"producer_byte_rate": 10**9})
        assert code == CLUSTER_AUTHORIZATION_FAILED
        assert alice.describe().error_code == CLUSTER_AUTHORIZATION_FAILED
        admin = AdminClient(_client(port, "admin"))
        bindings = [AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                               "User:alice", "*", op, AclPermissionType.ALLOW)
                    for op in (AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS)]
        for fut in admin.create_acls(bindings).values():
            fut.result(15)
        assert alice.table() == {}  # the refused alteration changed nothing
        assert alice.alter({"user": "carol"}, {"consumer_byte_rate": 5000})[0] == 0
        assert alice.table() == {(("user", "carol"),): {"consumer_byte_rate": 5000.0}}
    finally:
        alice.close()


def test_a_user_quota_throttles_that_user_only(secured: tuple[BrokerProcess, int]) -> None:
    _, port = secured
    admin = AdminClient(_client(port, "admin"))
    admin.create_topics([NewTopic("user-quota", 1, 1)])["user-quota"].result(15)
    for user in ("alice", "bob"):
        binding = AclBinding(ResourceType.TOPIC, "user-quota", ResourcePatternType.LITERAL,
                             f"User:{user}", "*", AclOperation.WRITE, AclPermissionType.ALLOW)
        for fut in admin.create_acls([binding]).values():
            fut.result(15)
    q = _quotas(port, "admin")
    assert q.alter({"user": "alice"}, {"producer_byte_rate": 50_000})[0] == 0
    q.close()

    def produce(user: str) -> tuple[list[float], float]:
        throttles: list[float] = []
        producer = Producer(_client(port, user, **{
            "client.id": "same-client", "linger.ms": 2, "batch.size": 16384,
            "throttle_cb": lambda e: throttles.append(e.throttle_time)}))
        started = time.monotonic()
        for _ in range(150):  # 300 KB: twice what alice's quota passes at once
            producer.produce("user-quota", b"y" * 2000)
            producer.poll(0)
        assert producer.flush(60) == 0
        return throttles, time.monotonic() - started

    alice_throttles, alice_s = produce("alice")
    bob_throttles, bob_s = produce("bob")
    assert alice_throttles and max(alice_throttles) > 0
    assert not bob_throttles
    # 300 KB at 50 KB/s with 150 KB passing at once: alice needs about 3 s
    assert alice_s >= 2 and bob_s < alice_s / 2
