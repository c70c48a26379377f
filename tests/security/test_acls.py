"""ACLs on a real broker with real clients: a principal without the permission gets
Kafka's authorization error and nothing changes; with it, the call works; super users
pass; CreateAcls/DescribeAcls/DeleteAcls through confluent-kafka's AdminClient."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.conftest import BrokerProcess
from tests.sasl_broker import AUTHORIZER, plain_sasl_broker


class Broker:
    def __init__(self, process: BrokerProcess, sasl_port: int) -> None:
        self.process, self.sasl_port = process, sasl_port

    def client(self, user: str, **extra: Any) -> dict[str, Any]:
        return {"bootstrap.servers": f"127.0.0.1:{self.sasl_port}",
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.username": user, "sasl.password": f"{user}-secret", **extra}

    def admin(self, user: str = "admin") -> AdminClient:
        return AdminClient(self.client(user))


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with plain_sasl_broker(tmp_path_factory.mktemp("acls") / "data", **AUTHORIZER,
                           **{"group.initial.rebalance.delay.ms": "0"}) as (process, port):
        yield Broker(process, port)


def _allow(broker: Broker, rtype: ResourceType, name: str, user: str,
           op: AclOperation) -> AclBinding:
    binding = AclBinding(rtype, name, ResourcePatternType.LITERAL, f"User:{user}", "*", op,
                         AclPermissionType.ALLOW)
    admin = broker.admin()  # kept alive until its futures are done
    for fut in admin.create_acls([binding]).values():
        fut.result(15)
    return binding


def _produce(config: dict[str, Any], topic: str) -> KafkaError | None:
    outcome: list[KafkaError | None] = []
    producer = Producer({**config, "message.timeout.ms": 10000, "retries": 0})
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(20)
    return outcome[0] if outcome else None


def test_produce_needs_write_on_the_topic(acl_broker: Broker) -> None:
    admin = acl_broker.admin()
    admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(15)
    denied = _produce(acl_broker.client("alice"), "orders")
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    _allow(acl_broker, ResourceType.TOPIC, "orders", "alice", AclOperation.WRITE)
    assert _produce(acl_broker.client("alice"), "orders") is None


def test_consume_needs_read_on_topic_and_group(acl_broker: Broker) -> None:
    admin = acl_broker.admin()
    admin.create_topics([NewTopic("reads", 1, 1)])["reads"].result(15)
    assert _produce(acl_broker.client("admin"), "reads") is None
    _allow(acl_broker, ResourceType.TOPIC, "reads", "bob", AclOperation.READ)

    def consume(group: str) -> Any:
        consumer = Consumer(acl_broker.client("bob", **{"group.id": group,
                                                        "auto.offset.reset": "earliest"}))
        try:
            consumer.subscribe(["reads"])
            for _ in range(40):
                msg = consumer.poll(0.5)
                if msg is not None:
                    return msg.error() or msg.value()
            return None
        finally:
            consumer.close()

    refused = consume("no-acl-group")
    assert isinstance(refused, KafkaError)
    assert refused.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    _allow(acl_broker, ResourceType.GROUP, "bob-group", "bob", AclOperation.READ)
    assert consume("bob-group") == b"v"


def test_admin_calls_without_permission_change_nothing(acl_broker: Broker) -> None:
    admin = acl_broker.admin()
    admin.create_topics([NewTopic("keep", 1, 1)])["keep"].result(15)
    alice = acl_broker.admin("alice")
    with pytest.raises(KafkaException) as deleted:
        alice.delete_topics(["keep"])["keep"].result(15)
    assert deleted.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as created:
        alice.create_topics([NewTopic("alices", 1, 1)])["alices"].result(15)
    assert created.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as acl:
        for fut in alice.create_acls([AclBinding(
                ResourceType.TOPIC, "keep", ResourcePatternType.LITERAL, "User:alice", "*",
                AclOperation.ALL, AclPermissionType.ALLOW)]).values():
            fut.result(15)
    assert acl.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    topics = admin.list_topics(timeout=10).topics
    assert "keep" in topics and "alices" not in topics
    # metadata of every topic lists only what the principal may describe
    assert "keep" not in alice.list_topics(timeout=10).topics


def test_describe_and_delete_acls(acl_broker: Broker) -> None:
    admin = acl_broker.admin()
    binding = _allow(acl_broker, ResourceType.TOPIC, "described", "carol",
                     AclOperation.READ)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    assert binding in admin.describe_acls(everything).result(15)
    only = AclBindingFilter(ResourceType.TOPIC, "described", ResourcePatternType.LITERAL,
                            "User:carol", None, AclOperation.ANY, AclPermissionType.ANY)
    removed = admin.delete_acls([only])[only].result(15)
    assert removed == [binding]
    assert binding not in admin.describe_acls(everything).result(15)


def test_acls_survive_a_restart(acl_broker: Broker) -> None:
    _allow(acl_broker, ResourceType.TOPIC, "durable", "dave", AclOperation.WRITE)
    acl_broker.process.restart()
    everything = AclBindingFilter(ResourceType.TOPIC, "durable", ResourcePatternType.ANY,
                                  None, None, AclOperation.ANY, AclPermissionType.ANY)
    admin = acl_broker.admin()
    found = admin.describe_acls(everything).result(15)
    assert [b.principal for b in found] == ["User:dave"]


def test_odradek_acls_adds_lists_and_removes_as_kafka_acls_does(
        acl_broker: Broker, tmp_path: Path) -> None:
    props = tmp_path / "admin.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in acl_broker.client("admin").items()
                             if k != "bootstrap.servers"))
    base = [sys.executable, "-m", "odradek", "acls", "--bootstrap-server",
            f"127.0.0.1:{acl_broker.sasl_port}", "--command-config", str(props)]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *args], capture_output=True, text=True, timeout=60)

    added = run("--add", "--allow-principal", "User:erin", "--operation", "Read",
                "--operation", "Describe", "--topic", "erins", "--group", "erin-g")
    assert added.returncode == 0, added.stderr
    assert ("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=erins, "
            "patternType=LITERAL)`:") in added.stdout
    assert "(principal=User:erin, host=*, operation=READ, permissionType=ALLOW)" in added.stdout
    listed = run("--list", "--topic", "erins")
    assert "operation=DESCRIBE" in listed.stdout and "erin-g" not in listed.stdout
    removed = run("--remove", "--force", "--allow-principal", "User:erin", "--topic", "erins")
    assert removed.returncode == 0, removed.stderr
    assert "User:erin" not in run("--list", "--topic", "erins").stdout
    both = run("--add", "--list", "--topic", "erins")
    assert both.returncode != 0
    assert "exactly one action" in both.stderr and len(both.stderr.strip().splitlines()) == 1


def test_describe_topic_partitions_needs_describe_and_telemetry_needs_nothing(
        acl_broker: Broker) -> None:
    from kafka.admin import KafkaAdminClient

    from odradek.protocol.errors import ErrorCode
    from tests.wire import WireClient

    admin = acl_broker.admin()
    for name in ("dtp-open", "dtp-closed"):
        admin.create_topics([NewTopic(name, 2, 1)])[name].result(15)
    _allow(acl_broker, ResourceType.TOPIC, "dtp-open", "ANONYMOUS", AclOperation.DESCRIBE)
    plaintext = f"127.0.0.1:{acl_broker.process.port}"  # User:ANONYMOUS
    anonymous = KafkaAdminClient(bootstrap_servers=plaintext)
    try:
        named = anonymous.describe_topic_partitions(["dtp-closed", "dtp-open"])["topics"]
        assert [(t["name"], t["error_code"], len(t["partitions"])) for t in named] == [
            ("dtp-open", 0, 2),
            ("dtp-closed", ErrorCode.topic_authorization_failed.value, 0)]  # last, as Kafka
        every = anonymous.describe_topic_partitions([])["topics"]
        assert [t["name"] for t in every] == ["dtp-open"]  # the rest are not even named
    finally:
        anonymous.close()
    with WireClient(plaintext) as w:
        assert w.call(71, 0, client_instance_id=None).error_code == ErrorCode.none


def test_kafka_acls_sh_with_kafkas_documented_invocations(
        acl_broker: Broker, tmp_path: Path) -> None:
    """kafka-acls.sh's examples from Kafka's documentation (security_authz_cli), through
    the module the `odradek kafka-path` scripts call."""
    props = tmp_path / "admin.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in acl_broker.client("admin").items()
                             if k != "bootstrap.servers"))
    base = [sys.executable, "-m", "odradek.cli.kafka", "kafka-acls", "--bootstrap-server",
            f"127.0.0.1:{acl_broker.sasl_port}", "--command-config", str(props)]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *args], capture_output=True, text=True, timeout=60)

    added = run("--add", "--allow-principal", "User:Bob", "--allow-principal", "User:Alice",
                "--allow-host", "198.51.100.0", "--allow-host", "198.51.100.1",
                "--operation", "Read", "--operation", "Write", "--topic", "Test-topic")
    assert added.returncode == 0, added.stderr
    listed = run("--list", "--topic", "Test-topic").stdout
    for who in ("User:Bob", "User:Alice"):
        for host in ("198.51.100.0", "198.51.100.1"):
            for op in ("READ", "WRITE"):
                assert (f"(principal={who}, host={host}, operation={op}, "
                        "permissionType=ALLOW)") in listed
    # the producer and consumer roles, then bob really consumes as a group member
    assert run("--add", "--allow-principal", "User:bob", "--producer",
               "--topic", "roles").returncode == 0
    assert run("--add", "--allow-principal", "User:bob", "--consumer", "--topic", "roles",
               "--group", "bobs").returncode == 0
    roles = run("--list", "--topic", "roles").stdout
    assert all(f"operation={op}, permissionType=ALLOW" in roles
               for op in ("WRITE", "DESCRIBE", "CREATE", "READ"))
    assert "operation=READ" in run("--list", "--group", "bobs").stdout
    admin = acl_broker.admin()  # (auto-creation is off: the super user creates it)
    admin.create_topics([NewTopic("roles", 1, 1)])["roles"].result(30)
    assert _produce(acl_broker.client("bob"), "roles") is None
    removed = run("--remove", "--allow-principal", "User:Bob", "--allow-principal",
                  "User:Alice", "--allow-host", "198.51.100.0", "--allow-host",
                  "198.51.100.1", "--operation", "Read", "--operation", "Write",
                  "--topic", "Test-topic", "--force")
    assert removed.returncode == 0, removed.stderr
    assert "User:Bob" not in run("--list", "--topic", "Test-topic").stdout
    # AclCommand's refusals: the message, then the usage, status 1
    both = run("--add", "--list", "--topic", "x")
    assert both.returncode == 1
    assert both.stderr.startswith("Command must include exactly one action")
    no_group = run("--add", "--allow-principal", "User:bob", "--consumer", "--topic", "x")
    assert no_group.returncode == 1 and 'Missing required argument "[group]"' in no_group.stderr


def test_kafka_acls_sh_lists_by_principal_as_acl_command(
        acl_broker: Broker, tmp_path: Path) -> None:
    """`--list --principal P`: each principal's ACLs under `ACLs for principal `P``, only
    the resources where it has some; `--principal` without `--list`, and resources
    odradek has nothing to authorize with (delegation tokens, users), refused."""
    props = tmp_path / "admin.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in acl_broker.client("admin").items()
                             if k != "bootstrap.servers"))
    base = [sys.executable, "-m", "odradek.cli.kafka", "kafka-acls", "--bootstrap-server",
            f"127.0.0.1:{acl_broker.sasl_port}", "--command-config", str(props)]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *args], capture_output=True, text=True, timeout=60)

    for who, topic in (("User:carol", "carols"), ("User:dan", "dans")):
        assert run("--add", "--allow-principal", who, "--operation", "Read",
                   "--topic", topic).returncode == 0
    carol = run("--list", "--principal", "User:carol")
    assert carol.returncode == 0, carol.stderr
    lines = carol.stdout.splitlines()
    assert lines[0] == "ACLs for principal `User:carol`"
    assert lines[1] == ("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, "
                        "name=carols, patternType=LITERAL)`: ")
    assert "User:dan" not in carol.stdout and "dans" not in carol.stdout
    both = run("--list", "--topic", "dans", "--principal", "User:carol",
               "--principal", "User:dan").stdout
    assert both.index("ACLs for principal `User:carol`") < both.index(
        "ACLs for principal `User:dan`") < both.index("name=dans")
    assert "name=carols" not in both  # only the --topic given
    refused = run("--add", "--allow-principal", "User:x", "--principal", "User:x",
                  "--operation", "Read", "--topic", "t")
    assert refused.returncode == 1
    assert refused.stderr.startswith("The --principal option is only available if --list")
    for flag in ("--delegation-token", "--user-principal"):
        out = run("--add", "--allow-principal", "User:x", "--operation", "Describe", flag, "y")
        assert out.returncode == 1
        assert f"--{flag.lstrip('-')} is not supported by odradek: it has no delegation " \
               "tokens" in out.stderr.splitlines()[0]
