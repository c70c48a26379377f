"""A ZooKeeper cluster secured end to end, as Kafka's: three broker processes with only
SASL_SSL listeners (SCRAM-SHA-512), replicating over that listener with their own
login (User:admin, a super user), ACLs on, credentials created in ZooKeeper before
any broker starts (`odradek kafka-configs --zookeeper`, as kafka-configs.sh)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramMechanism,
)

from odradek.protocol.messages import request_class
from odradek.replication.channel import BrokerChannel, ChannelSecurity
from odradek.security.certs import Bundle, write_bundle
from odradek.security.sasl.client import PlainClient, ScramClient
from odradek.security.tls import client_context
from tests.cluster.harness import Cluster, client_config
from tests.zk import ZooKeeperProcess, zookeeper  # noqa: F401  (fixture)

pytestmark = pytest.mark.timeout(180)

SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="admin" password="admin-secret";')
JAAS_PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret";')
TOPIC = "payments"


def broker_settings(bundle: Bundle) -> dict[str, str]:
    tls = {f"listener.name.sasl_ssl.{k}": v
           for k, v in bundle.broker_properties("localhost").items() if k != "ssl.client.auth"}
    return {
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        **tls,
    }


def login(bundle: Bundle, user: str, password: str) -> dict[str, Any]:
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": password,
            "ssl.ca.location": str(bundle.ca_path)}


def admin_properties(base: Path, bundle: Bundle) -> Path:
    """The admin's client.properties in the Java client's names (--command-config)."""
    path = base / "admin.properties"
    path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                    f"sasl.jaas.config={SCRAM_JAAS}\nssl.truststore.type=PEM\n"
                    f"ssl.truststore.location={bundle.ca_path}\n")
    return path


def odradek_here(*args: str) -> Any:
    """The odradek command, run in this process (a child's start-up costs seconds on a
    busy machine; `cluster up --secure` below runs the real thing)."""
    from typer.testing import CliRunner

    from odradek.cli.main import app

    return CliRunner().invoke(app, list(args))


def odradek(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", *args], capture_output=True,
                          text=True, timeout=60)


@pytest.fixture(scope="module")
def secure_cluster(tmp_path_factory: pytest.TempPathFactory,
                   zookeeper: ZooKeeperProcess) -> Iterator[tuple[Cluster, Bundle]]:  # noqa: F811
    base = tmp_path_factory.mktemp("secure-cluster")
    bundle = write_bundle(base / "tls", brokers=["localhost"], users=[])
    small = {"offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3"}
    cluster = Cluster(base, size=3, configs={**broker_settings(bundle), **small},
                      zookeeper=zookeeper)
    for b in cluster.brokers.values():
        b.overrides["listeners"] = f"SASL_SSL://127.0.0.1:{b.port}"
    cluster.client_settings = login(bundle, "admin", "admin-secret")
    # the first admin, straight into ZooKeeper before any broker runs
    made = odradek_here("kafka-configs", "--zookeeper", cluster.connect, "--alter",
                        "--add-config", "SCRAM-SHA-512=[iterations=4096,password=admin-secret]",
                        "--entity-type", "users", "--entity-name", "admin")
    assert made.exit_code == 0, made.output
    assert made.stdout.strip() == "Completed updating config for user admin."
    for b in cluster.brokers.values():
        b.overrides["zookeeper.connect"] = cluster.connect
    try:
        with ThreadPoolExecutor(3) as pool:  # three processes starting at once
            list(pool.map(cluster.start, cluster.brokers))
        cluster.wait_formed()
        yield cluster, bundle
    finally:
        cluster.down()


def _channel(cluster: Cluster, bundle: Bundle, node_id: int) -> BrokerChannel:
    """Our own inter-broker channel, as admin, to one chosen broker."""
    ctx = client_context({"security.protocol": "SASL_SSL",
                          "ssl.ca.location": str(bundle.ca_path)})
    security = ChannelSecurity(ctx, lambda: ScramClient("SCRAM-SHA-512", "admin",
                                                        "admin-secret"), "SASL_SSL")
    return BrokerChannel("127.0.0.1", cluster.broker(node_id).port, "test", 10.0,
                         security=security)


async def _create_acl_then_wait_everywhere(cluster: Cluster, bundle: Bundle, through: int,
                                           others: list[int]) -> float:
    """CreateAcls (alice READ on the topic) through one broker; the seconds until every
    other broker's authorizer lists it (DescribeAcls answers from its own cache)."""
    create = request_class(30, 1)
    creation = sys.modules[create.__module__].AclCreation(
        resource_type=2, resource_name=TOPIC, resource_pattern_type=3,
        principal="User:alice", host="*", operation=3, permission_type=3)
    describe = request_class(29, 1)(
        resource_type_filter=2, resource_name_filter=TOPIC, pattern_type_filter=3,
        principal_filter="User:alice", host_filter=None, operation=3, permission_type=3)
    channels = {n: _channel(cluster, bundle, n) for n in [through, *others]}
    try:
        for ch in channels.values():
            await ch.connect()  # logged in before the clock starts
        answer = await channels[through].call(30, 1, create(creations=(creation,)))
        assert [r.error_code for r in answer.results] == [0]
        created = time.monotonic()
        pending = set(others)
        while pending:
            for n in sorted(pending):
                found = await channels[n].call(29, 1, describe)
                if found.resources:
                    pending.discard(n)
            assert time.monotonic() - created < 5, f"brokers {pending} never saw the ACL"
        return time.monotonic() - created
    finally:
        for ch in channels.values():
            ch.close()


def test_sasl_ssl_cluster_replicates_and_enforces_acls_from_any_broker(
        secure_cluster: tuple[Cluster, Bundle]) -> None:
    cluster, bundle = secure_cluster
    admin = cluster.admin()
    # alice's credential through the cluster, as an admin types it (AlterUserScramCredentials
    # with the admin's own login; the broker writes /config/users/alice)
    made = odradek_here("configs", "alter", "--bootstrap-server", cluster.bootstrap,
                        "--command-config", str(admin_properties(cluster.base, bundle)),
                        "--entity-type", "users", "--entity-name", "alice",
                        "--add-config", "SCRAM-SHA-512=[password=alice-secret]")
    assert made.exit_code == 0, made.output
    described = admin.describe_user_scram_credentials(["alice"])["alice"].result(15)
    assert [(c.mechanism, c.iterations) for c in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 4096)]
    topic = NewTopic(TOPIC, num_partitions=1, replication_factor=-1,
                     replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "3"})
    for f in admin.create_topics([topic], operation_timeout=20).values():
        f.result(30)
    acls = [AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice",
                       "*", AclOperation.WRITE, AclPermissionType.ALLOW),
            AclBinding(ResourceType.GROUP, "alice-group", ResourcePatternType.LITERAL,
                       "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)]
    for f in admin.create_acls(acls).values():
        f.result(15)

    # acks=all with min.insync.replicas=3: each write is on all three brokers, which
    # can only be if the followers fetch over SASL_SSL as admin
    alice = login(bundle, "alice", "alice-secret")
    producer = Producer(client_config(cluster.bootstrap, acks="all", **alice,
                                      **{"enable.idempotence": False}))
    delivered: list[Any] = []
    for i in range(20):
        producer.produce(TOPIC, f"v{i}".encode(), on_delivery=lambda e, m: delivered.append(e))
    assert producer.flush(60) == 0
    assert delivered == [None] * 20
    leader, _, isr = cluster.partitions(TOPIC)[0]
    assert leader == 1 and sorted(isr) == [1, 2, 3]
    logs = "".join(cluster.logs(n) for n in (2, 3))
    assert "refused our SASL" not in logs and "CERTIFICATE_VERIFY_FAILED" not in logs

    # alice may write but not read: Kafka's error on consume
    consumer = Consumer(client_config(cluster.bootstrap, **alice, **{
        "group.id": "alice-group", "auto.offset.reset": "earliest",
        "enable.auto.commit": False}))
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        error = None
        deadline = time.monotonic() + 20
        while error is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            assert msg is None or msg.error() is not None, "read without READ"
            if msg is not None and msg.error().code() != KafkaError._PARTITION_EOF:
                error = msg.error()
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        consumer.close()

    # READ added through broker 3 is known to brokers 1 and 2 within a second ...
    elapsed = asyncio.run(_create_acl_then_wait_everywhere(cluster, bundle, 3, [1, 2]))
    assert elapsed < 1.0, f"the ACL took {elapsed:.2f}s to reach the other brokers"
    # ... and the leader (broker 1) lets alice read
    consumer = Consumer(client_config(cluster.bootstrap, **alice, **{
        "group.id": "alice-group", "auto.offset.reset": "earliest",
        "enable.auto.commit": False}))
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(values) < 20 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        assert values == [f"v{i}".encode() for i in range(20)]
    finally:
        consumer.close()


def test_scram_client_logs_in_to_kafkas_scram_server_and_checks_its_signature() -> None:
    from odradek.security.sasl.base import SaslFailure
    from odradek.security.sasl.scram import ScramServer, make_credential

    stored = make_credential("SCRAM-SHA-256", "pw", 4096)
    for password, ok in (("pw", True), ("wrong", False)):
        client = ScramClient("SCRAM-SHA-256", "a=b,c", password)
        server = ScramServer("SCRAM-SHA-256",
                             lambda user: stored if user == "a=b,c" else None)
        challenge = server.evaluate(client.first())
        final = client.evaluate(challenge)
        if not ok:
            with pytest.raises(SaslFailure):
                server.evaluate(final)
            continue
        client.evaluate(server.evaluate(final))
        assert client.complete and server.authorization_id == "a=b,c"
    forged = ScramClient("SCRAM-SHA-256", "u", "pw")
    forged.evaluate(f"r={forged.first().decode().rsplit('r=', 1)[1]}xyz,s=c2FsdA==,i=4096"
                    .encode())
    with pytest.raises(SaslFailure, match="server signature"):
        forged.evaluate(b"v=AAAA")


def test_the_inter_broker_channel_speaks_tls_with_the_broker_keystore_and_sasl(
        secured: Any) -> None:
    """Against one broker with an SSL listener that requires client certificates and a
    SASL_SSL one with PLAIN: the channel the broker builds from its own properties."""
    from odradek.replication.channel import ChannelAuthenticationError
    from odradek.server import inter_broker

    keystore = secured.bundle.broker_properties("localhost")
    props = {**{f"listener.name.ssl.{k}": v for k, v in keystore.items()},
             **{f"listener.name.sasl_ssl.{k}": v for k, v in keystore.items()},
             "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
             "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS_PLAIN}
    versions = request_class(18, 3)(client_software_name="odradek",
                                    client_software_version="1")

    async def call(listener: str, security: ChannelSecurity) -> int:
        ch = BrokerChannel("localhost", secured.ports[listener], "t", 10.0, security=security)
        try:
            return int((await ch.call(18, 3, versions)).error_code)
        finally:
            ch.close()

    ssl_security = inter_broker.security(props, "SSL", "SSL")
    assert asyncio.run(call("SSL", ssl_security)) == 0  # the keystore was the client cert
    no_cert = ChannelSecurity(client_context({"security.protocol": "SSL",
                                              "ssl.ca.location": str(secured.bundle.ca_path)}))
    with pytest.raises((OSError, asyncio.IncompleteReadError)):
        asyncio.run(call("SSL", no_cert))
    sasl_security = inter_broker.security(props, "SASL_SSL", "SASL_SSL")
    assert asyncio.run(call("SASL_SSL", sasl_security)) == 0
    wrong = ChannelSecurity(sasl_security.ssl_context,
                            lambda: PlainClient("admin", "not-the-password"), "SASL_SSL")
    with pytest.raises(ChannelAuthenticationError, match="refused our SASL PLAIN login"):
        asyncio.run(call("SASL_SSL", wrong))


@pytest.mark.parametrize("overrides,message", [
    ({"listeners": "INTERNAL://127.0.0.1:0",
      "listener.security.protocol.map": "INTERNAL:PLAINTEXT"},
     "inter.broker.listener.name must be a listener name defined in advertised.listeners"),
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "SSL"},
     "Only one of inter.broker.listener.name and security.inter.broker.protocol"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
      "security.inter.broker.protocol": "SASL_PLAINTEXT"},
     "sasl.mechanism.inter.broker.protocol must be set"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
      "security.inter.broker.protocol": "SASL_PLAINTEXT",
      "sasl.mechanism.inter.broker.protocol": "PLAIN"},
     "must be included in sasl.enabled.mechanisms"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
      "security.inter.broker.protocol": "SASL_PLAINTEXT",
      "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"},
     r"listener\.name\.sasl_plaintext\.scram-sha-512\.sasl\.jaas\.config is needed"),
])
def test_a_cluster_broker_refuses_an_inter_broker_listener_it_cannot_use(
        tmp_path: Path, overrides: dict[str, str], message: str) -> None:
    from odradek.configdef import ConfigError
    from odradek.server.config import BrokerConfig

    with pytest.raises(ConfigError, match=message):
        BrokerConfig.load(environ={}, overrides={
            "zookeeper.connect": "127.0.0.1:2181", "log.dirs": str(tmp_path), **overrides})


@pytest.mark.slow
def test_cluster_up_secure_gives_a_sasl_ssl_cluster_and_the_client_config_for_it(
        tmp_path: Path) -> None:
    """`odradek cluster up --secure`: only SASL_SSL, ACLs on; the printed settings and the
    client.properties file are the admin's way in; a client without a login is not."""
    import re
    import signal

    from confluent_kafka.admin import AdminClient

    from tests.conftest import free_port_run
    from tests.processes import started, stop, wait_for_output

    base = free_port_run(4)
    log_path = tmp_path / "cluster-up.log"
    cmd = [sys.executable, "-m", "odradek", "cluster", "up", "--secure", "--brokers", "3",
           "--data-dir", str(tmp_path / "c"), "--base-port", str(base),
           "--zookeeper-port", str(base + 3)]
    with started(cmd, log_path) as proc:
        bootstrap = wait_for_output(proc, log_path, r"bootstrap\.servers=(\S+)").group(1)
        properties = Path(wait_for_output(proc, log_path,
                                          r"client\.properties=(\S+)").group(1))
        text = log_path.read_text()
        settings = dict(re.findall(r"^  (\S+?)=(\S+)$", text, re.MULTILINE))
        assert settings["security.protocol"] == "SASL_SSL"
        assert "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule" \
            in properties.read_text()
        admin = AdminClient(client_config(bootstrap, **settings))
        for f in admin.create_topics([NewTopic("secure-up", 1, 3)]).values():
            f.result(30)
        producer = Producer(client_config(bootstrap, acks="all", **settings))
        producer.produce("secure-up", b"x")
        assert producer.flush(30) == 0
        listed = odradek("acls", "--bootstrap-server", bootstrap, "--command-config",
                         str(properties), "--list")
        assert listed.returncode == 0, listed.stderr
        anonymous = AdminClient(client_config(bootstrap, **{"socket.timeout.ms": 2000}))
        with pytest.raises(Exception):  # noqa: B017 - a plaintext client gets nowhere
            anonymous.list_topics(timeout=3)
        assert stop(proc, signal.SIGINT) == 0


@pytest.mark.slow
def test_transactions_commit_across_brokers_over_the_secured_inter_broker_listener(
        secure_cluster: tuple[Cluster, Bundle]) -> None:
    """Partitions led by all three brokers: the transaction coordinator's
    WriteTxnMarkers reach the other two over SASL_SSL, as admin."""
    cluster, bundle = secure_cluster
    admin = cluster.admin()
    topic = NewTopic("ledger", num_partitions=3, replication_factor=-1,
                     replica_assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    for f in admin.create_topics([topic], operation_timeout=20).values():
        f.result(30)
    me = login(bundle, "admin", "admin-secret")
    producer = Producer(client_config(cluster.bootstrap, **me, **{
        "transactional.id": "ledger-writer", "transaction.timeout.ms": 20000}))
    producer.init_transactions(60)
    for batch, commit in ((0, True), (1, False), (2, True)):
        producer.begin_transaction()
        for p in range(3):
            producer.produce("ledger", f"b{batch}p{p}".encode(), partition=p)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    consumer = Consumer(client_config(cluster.bootstrap, **me, **{
        "group.id": "ledger-reader", "isolation.level": "read_committed",
        "enable.auto.commit": False}))
    try:
        consumer.assign([TopicPartition("ledger", p, 0) for p in range(3)])
        got: set[bytes] = set()
        deadline = time.monotonic() + 30
        while len(got) < 6 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.add(msg.value())
        assert got == {f"b{b}p{p}".encode() for b in (0, 2) for p in range(3)}
    finally:
        consumer.close()


@pytest.mark.slow
def test_a_broker_whose_own_login_is_refused_says_so_and_stays_out_of_the_isr(
        tmp_path: Path, zookeeper: ZooKeeperProcess) -> None:  # noqa: F811
    """Broker 3 logs in to the others with a wrong password: it cannot replicate,
    says why in its log, and the leader keeps it out of the ISR (acks=all with
    min.insync.replicas=2 still works on 1 and 2)."""
    bundle = write_bundle(tmp_path / "tls", brokers=["localhost"], users=[])
    wrong = SCRAM_JAAS.replace("admin-secret", "not-the-password")
    cluster = Cluster(tmp_path, size=3, zookeeper=zookeeper, configs={
        **broker_settings(bundle), "offsets.topic.num.partitions": "3",
        "replica.lag.time.max.ms": "3000"},
        broker_configs={3: {"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": wrong}})
    for b in cluster.brokers.values():
        b.overrides["listeners"] = f"SASL_SSL://127.0.0.1:{b.port}"
        b.overrides["zookeeper.connect"] = cluster.connect
    cluster.client_settings = login(bundle, "admin", "admin-secret")
    made = odradek_here("kafka-configs", "--zookeeper", cluster.connect, "--alter",
                        "--add-config", "SCRAM-SHA-512=[password=admin-secret]",
                        "--entity-type", "users", "--entity-name", "admin")
    assert made.exit_code == 0, made.output
    try:
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(cluster.start, cluster.brokers))
        cluster.wait_formed()
        topic = NewTopic("guarded", num_partitions=1, replication_factor=-1,
                         replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "2"})
        admin = cluster.admin()  # held until the answer: a dropped client cancels it
        for f in admin.create_topics([topic], operation_timeout=20).values():
            f.result(30)
        cluster.wait_for(lambda: "refused our SASL SCRAM-SHA-512 login" in cluster.logs(3),
                         30, "broker 3 to log its refused login")
        cluster.wait_for(lambda: sorted(cluster.partitions("guarded")[0][2]) == [1, 2], 30,
                         "broker 3 to leave the ISR")
        producer = Producer(client_config(cluster.bootstrap, acks="all",
                                          **cluster.client_settings))
        producer.produce("guarded", b"x")
        assert producer.flush(30) == 0
        assert "not-the-password" not in "".join(cluster.logs(n) for n in (1, 2, 3))
    finally:
        cluster.down()
