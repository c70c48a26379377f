"""OAUTHBEARER between brokers, with real broker processes and real ZooKeeper.

Brokers log in to each other with Kafka's unsecured login (a token with `sub=admin`
and the scope every broker's validator requires), ACLs on, and a real client's
acks=all writes are on every replica; a broker whose token lacks the scope is refused
by the others, says so in one line, and stays out of the ISR. With the OAuth login
(KIP-768), each broker gets its token from a token endpoint the test runs, and the
brokers verify it against that endpoint's JWKS; with `connections.max.reauth.ms` the
broker's connections log in again before the other broker would cut them off."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from odradek.protocol.messages import request_class
from odradek.replication.channel import BrokerChannel, ChannelSecurity
from tests.cluster.harness import Cluster, client_config
from tests.conftest import BrokerProcess, free_port
from tests.security.oauth_idp import IdentityProvider
from tests.zk import ZooKeeperProcess, zookeeper  # noqa: F401  (fixture)

pytestmark = pytest.mark.timeout(180)

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
JAAS = "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"
SCOPE = "kafka-broker"
VALIDATOR = f'unsecuredValidatorRequiredScope="{SCOPE}"'
REAUTH_S = 5.0  # long enough that a loaded machine's delays stay inside 15% of it
BROKER_LOGIN = f'unsecuredLoginStringClaim_sub="admin" unsecuredLoginListClaim_scope="|{SCOPE}"'


def unsecured_client(principal: str) -> dict[str, Any]:
    """librdkafka's own unsecured OAUTHBEARER login."""
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": f"principal={principal} scope={SCOPE}"}


def oauth_settings(**extra: str) -> dict[str, str]:
    return {
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3",
        **extra,
    }


def start_all(cluster: Cluster) -> None:
    for b in cluster.brokers.values():
        b.overrides["listeners"] = f"SASL_PLAINTEXT://127.0.0.1:{b.port}"
        b.overrides["zookeeper.connect"] = cluster.connect
    with ThreadPoolExecutor(len(cluster.brokers)) as pool:  # the processes start at once
        list(pool.map(cluster.start, cluster.brokers))
    cluster.wait_formed()


def full_log(cluster: Cluster, node_id: int) -> str:
    return cluster.broker(node_id).log_path.read_text(errors="replace")  # not just its tail


def produce_acks_all(cluster: Cluster, topic: str, settings: dict[str, Any], n: int) -> None:
    producer = Producer(client_config(cluster.bootstrap, acks="all", **settings,
                                      **{"enable.idempotence": False}))
    delivered: list[Any] = []
    for i in range(n):
        producer.produce(topic, f"v{i}".encode(), on_delivery=lambda e, m: delivered.append(e))
    assert producer.flush(60) == 0
    assert delivered == [None] * n


def test_brokers_replicate_over_oauthbearer_and_a_broker_without_the_scope_stays_out(
        tmp_path: Path, zookeeper: ZooKeeperProcess) -> None:  # noqa: F811
    """Brokers 1-3 log in as admin with the scope; broker 4's token has no scope."""
    cluster = Cluster(tmp_path, size=4, zookeeper=zookeeper, configs=oauth_settings(**{
        JAAS: f"{MODULE} {BROKER_LOGIN} {VALIDATOR};", "replica.lag.time.max.ms": "3000",
        "connections.max.reauth.ms": str(int(REAUTH_S * 1000))}),
        broker_configs={4: {JAAS: f'{MODULE} unsecuredLoginStringClaim_sub="admin" '
                                  f'{VALIDATOR};'}})
    cluster.client_settings = unsecured_client("admin")
    try:
        start_all(cluster)
        admin = cluster.admin()  # held until the answers: a dropped client cancels them
        topics = [NewTopic("replicated", num_partitions=1, replication_factor=-1,
                           replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "3"}),
                  NewTopic("guarded", num_partitions=1, replication_factor=-1,
                           replica_assignment=[[1, 2, 4]], config={"min.insync.replicas": "2"})]
        for f in admin.create_topics(topics, operation_timeout=20).values():
            f.result(30)
        acl = AclBinding(ResourceType.TOPIC, "replicated", ResourcePatternType.LITERAL,
                         "User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW)
        for f in admin.create_acls([acl]).values():
            f.result(15)
        leader_admin = cluster.admin(1)  # the leader knows it before alice writes there
        cluster.wait_for(lambda: leader_admin.describe_acls(
            AclBindingFilter(ResourceType.TOPIC, "replicated", ResourcePatternType.LITERAL,
                             "User:alice", None, AclOperation.ANY, AclPermissionType.ANY)
        ).result(5), 10, "broker 1 to know alice's ACL")

        # min.insync.replicas=3 and acks=all: every write is on brokers 1, 2 and 3, which
        # can only be if 2 and 3 fetch from 1 logged in over OAUTHBEARER as User:admin
        produce_acks_all(cluster, "replicated", unsecured_client("alice"), 20)
        first_write = time.monotonic()
        leader, _, isr = cluster.partitions("replicated")[0]
        assert leader == 1 and sorted(isr) == [1, 2, 3]

        cluster.wait_for(lambda: "refused our SASL OAUTHBEARER login" in cluster.logs(4),
                         30, "broker 4 to log its refused login")
        line = next(x for x in cluster.logs(4).splitlines()
                    if "refused our SASL OAUTHBEARER login" in x)
        assert "insufficient_scope" in line
        # and the broker that refused it says why, in one line too
        assert "was missing a required scope (kafka-broker)" in next(
            x for x in full_log(cluster, 1).splitlines() if "Failed authentication with" in x)
        cluster.wait_for(lambda: sorted(cluster.partitions("guarded")[0][2]) == [1, 2], 30,
                         "broker 4 to leave the ISR")
        produce_acks_all(cluster, "guarded", cluster.client_settings, 1)
        # the followers' sessions, opened before the first write, end within
        # connections.max.reauth.ms of it: they log in again before that (at 85%), so
        # broker 1 never has to close one (it would log the fetch it refused) and they
        # stay in the ISR
        cluster.wait_for(lambda: time.monotonic() - first_write > REAUTH_S + 1, 30,
                         "the followers' sessions to end")
        produce_acks_all(cluster, "replicated", unsecured_client("alice"), 5)
        assert sorted(cluster.partitions("replicated")[0][2]) == [1, 2, 3]
        assert "Fetch before SASL authentication" not in full_log(cluster, 1)
        for n in (1, 2, 3):
            assert "refused our SASL" not in full_log(cluster, n)
    finally:
        cluster.down()


@pytest.fixture
def idp(tmp_path: Path) -> Iterator[IdentityProvider]:
    with IdentityProvider(tmp_path, {"broker": "broker-s3cret", "alice": "alice-s3cret"},
                          lifetime_s=3600).serving() as provider:
        yield provider


def test_a_broker_logs_in_with_a_token_from_the_oauth_endpoint_and_again_before_reauth(
        tmp_path: Path, idp: IdentityProvider) -> None:
    """One broker whose listener verifies tokens against the IdP's JWKS; the channel a
    broker builds from the same properties gets its token from the IdP, is taken as
    User:broker, and logs in again before connections.max.reauth.ms ends its session."""
    from odradek.server import inter_broker

    port = free_port()
    props = {"sasl.enabled.mechanisms": "OAUTHBEARER",
             "security.inter.broker.protocol": "SASL_PLAINTEXT",
             "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
             "connections.max.reauth.ms": "3000",
             **idp.broker_properties("SASL_PLAINTEXT", "broker", "broker-s3cret")}
    broker = BrokerProcess(tmp_path / "data", port=port, overrides={
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}", **props})
    broker.start()
    try:
        assert idp.requests, "the broker did not check its login at start-up"
        security = inter_broker.security(props, "SASL_PLAINTEXT", "SASL_PLAINTEXT")
        assert security.sasl is not None
        logins: list[Any] = []

        def counted() -> Any:
            client = security.sasl()  # type: ignore[misc]
            logins.append(client)
            return client

        versions = request_class(18, 3)(client_software_name="odradek",
                                        client_software_version="1")

        async def until_logged_in_twice() -> None:
            ch = BrokerChannel("127.0.0.1", port, "t", 10.0, security=ChannelSecurity(
                None, counted, "SASL_PLAINTEXT"))
            deadline = time.monotonic() + 30
            try:
                while len(logins) < 2:  # the first, then one before its session ends
                    assert time.monotonic() < deadline, f"{len(logins)} logins"
                    try:
                        answer = await ch.call(18, 3, versions)
                    except ConnectionError as e:  # no token yet: the login's thread gets it
                        assert "no token yet" in str(e), e
                        await asyncio.sleep(0.05)
                        continue
                    assert answer.error_code == 0
                    await asyncio.sleep(0.05)
            finally:
                ch.close()

        asyncio.run(until_logged_in_twice())
        assert all(c.complete for c in logins)
        assert "Failed authentication" not in broker.logs()
        security.sasl.__self__.close()  # type: ignore[union-attr]
    finally:
        broker.stop()


def test_a_three_broker_cluster_logs_in_with_oauth_tokens_verified_against_the_jwks(
        tmp_path: Path, zookeeper: ZooKeeperProcess,  # noqa: F811
        idp: IdentityProvider) -> None:
    cluster = Cluster(tmp_path, size=3, zookeeper=zookeeper, configs=oauth_settings(**{
        **idp.broker_properties("SASL_PLAINTEXT", "broker", "broker-s3cret"),
        "super.users": "User:broker"}))
    oidc = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.token.endpoint.url": idp.token_url}
    cluster.client_settings = {**oidc, "sasl.oauthbearer.client.id": "broker",
                               "sasl.oauthbearer.client.secret": "broker-s3cret"}
    try:
        start_all(cluster)
        admin = cluster.admin()
        topic = NewTopic("oidc", num_partitions=1, replication_factor=-1,
                         replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "3"})
        for f in admin.create_topics([topic], operation_timeout=20).values():
            f.result(30)
        produce_acks_all(cluster, "oidc", cluster.client_settings, 10)
        assert sorted(cluster.partitions("oidc")[0][2]) == [1, 2, 3]
        consumer = Consumer(client_config(cluster.bootstrap, **cluster.client_settings, **{
            "group.id": "g", "enable.auto.commit": False}))
        try:
            consumer.assign([TopicPartition("oidc", 0, 0)])
            got: list[bytes] = []
            deadline = time.monotonic() + 20
            while len(got) < 10 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    got.append(msg.value())
            assert got == [f"v{i}".encode() for i in range(10)]
        finally:
            consumer.close()
        assert {r["client_id"] for r in idp.requests} == {"broker"}
    finally:
        cluster.down()
