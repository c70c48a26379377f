"""The registry hosted in the broker's process (`schema.registry.listeners`), as Redpanda's:
confluent-kafka's SchemaRegistryClient and serdes against `odradek broker` started with the
property, a malformed value refused at start-up, and two brokers of a cluster serving the
same ids."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.configdef import ConfigError
from odradek.server.config import BrokerConfig
from tests.cluster.harness import Cluster
from tests.conftest import BrokerProcess, free_port

READING = {"type": "record", "name": "Reading", "namespace": "t", "fields": [
    {"name": "device", "type": "string"}, {"name": "value", "type": "double"}]}


def wait_for_registry(url: str, broker: BrokerProcess, timeout: float = 60.0) -> None:
    """Until the registry answers and its group has a leader (a write goes through)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not broker.alive():
            raise RuntimeError(f"the broker exited:\n{broker.logs()}")
        try:
            if httpx.put(f"{url}/config", json={"compatibility": "BACKWARD"},
                         timeout=35).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"no registry on {url} within {timeout}s:\n{broker.logs()}")


def test_broker_hosts_the_registry_its_clients_use(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    broker = BrokerProcess(tmp_path / "data", overrides={
        "schema.registry.listeners": url, "group.initial.rebalance.delay.ms": "0"})
    try:
        broker.start()
        wait_for_registry(url, broker)
        client = SchemaRegistryClient({"url": url})
        topic = f"readings-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        serialize = AvroSerializer(client, json.dumps(READING))
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        errors: list[object] = []
        for i in range(3):
            producer.produce(topic, serialize({"device": f"d{i}", "value": i / 2},
                                              SerializationContext(topic, MessageField.VALUE)),
                             on_delivery=lambda err, _m: errors.append(err) if err else None)
        assert producer.flush(30) == 0 and not errors
        registered = client.get_latest_version(f"{topic}-value")
        assert registered.version == 1
        assert json.loads(client.get_schema(registered.schema_id).schema_str)["name"] == \
            "Reading"
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g",
                             "auto.offset.reset": "earliest"})
        deserialize = AvroDeserializer(client)
        try:
            consumer.subscribe([topic])
            got: list[object] = []
            deadline = time.monotonic() + 30
            while len(got) < 3 and time.monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is not None and m.error() is None:
                    got.append(deserialize(m.value(),
                                           SerializationContext(topic, MessageField.VALUE)))
        finally:
            consumer.close()
        assert got == [{"device": f"d{i}", "value": i / 2} for i in range(3)]
        # an incompatible change is refused by the hosted registry as by Confluent's
        bad = {**READING, "fields": [{"name": "device", "type": "long"}]}
        with pytest.raises(SchemaRegistryError) as refused:
            client.register_schema(f"{topic}-value", Schema(json.dumps(bad), "AVRO"))
        assert refused.value.http_status_code == 409
    finally:
        broker.stop()
    with pytest.raises(httpx.HTTPError):  # the registry stopped with its broker
        httpx.get(f"{url}/subjects", timeout=2)


@pytest.mark.parametrize("value", ["127.0.0.1:8081", "http://127.0.0.1",
                                   "http://127.0.0.1:99999", "http://a:1,http://b:2"])
def test_malformed_listener_is_named_in_the_error(value: str) -> None:
    with pytest.raises(ConfigError, match=r"schema\.registry\.listeners.*http://host:port"):
        BrokerConfig.load(overrides={"schema.registry.listeners": value})


def test_broker_refuses_a_malformed_listener_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "odradek", "broker", "--override",
                           f"log.dirs={tmp_path}", "--override",
                           f"listeners=PLAINTEXT://127.0.0.1:{free_port()}", "--override",
                           "schema.registry.listeners=https://127.0.0.1:8081"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "schema.registry.listeners" in lines[0], done.stderr
    assert not any(tmp_path.iterdir())  # refused before anything was written


def test_registry_port_in_use_stops_the_broker_and_says_why(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "odradek", "broker", "--log-level",
                               "ERROR", "--override", f"log.dirs={tmp_path}", "--override",
                               f"listeners=PLAINTEXT://127.0.0.1:{free_port()}", "--override",
                               f"schema.registry.listeners=http://127.0.0.1:{port}"],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: cannot start the broker: [Errno 98] cannot listen on 127.0.0.1:{port}: "
        "Address already in use")


@pytest.mark.slow  # ZooKeeper and two brokers: 8-25 s; the single-broker test is the short one
def test_two_brokers_of_a_cluster_serve_the_same_ids(tmp_path: Path) -> None:
    urls = {n: f"http://127.0.0.1:{free_port()}" for n in (1, 2)}
    with Cluster(tmp_path, size=2, broker_configs={
            n: {"schema.registry.listeners": u} for n, u in urls.items()}) as cluster:
        for n, u in urls.items():
            wait_for_registry(u, cluster.broker(n))
        clients = {n: SchemaRegistryClient({"url": u}) for n, u in urls.items()}
        ids = []
        for i, n in enumerate((1, 2, 2, 1)):  # writes on either reach the one leader
            schema = {**READING, "name": f"R{i}"}
            ids.append(clients[n].register_schema(f"s{i}", Schema(json.dumps(schema), "AVRO")))
        assert len(set(ids)) == 4
        for i, schema_id in enumerate(ids):
            for n in (1, 2):
                assert clients[n].get_latest_version(f"s{i}").schema_id == schema_id
                assert json.loads(clients[n].get_schema(schema_id).schema_str)["name"] == \
                    f"R{i}"
        _, replicas, _ = cluster.partitions("_schemas")[0]
        assert len(replicas) == 2  # as the cluster's internal topics


def test_the_hosted_registry_enforces_subject_acls(tmp_path: Path) -> None:
    """schema.registry.basic.auth.file / enable.authorization / super.users: the hosted
    registry authorizes as the standalone one (docs/registry.md, "ACLs on subjects")."""
    from typer.testing import CliRunner

    from odradek.cli import schemas

    users = tmp_path / "password.properties"
    users.write_text("alice: a-secret\nbob: b-secret\nadmin: root\n")
    url = f"http://127.0.0.1:{free_port()}"
    broker = BrokerProcess(tmp_path / "data", overrides={
        "schema.registry.listeners": url, "group.initial.rebalance.delay.ms": "0",
        "schema.registry.basic.auth.file": str(users),
        "schema.registry.enable.authorization": "true",
        "schema.registry.super.users": "User:admin"})
    schema = Schema(json.dumps(READING), "AVRO")
    try:
        broker.start()
        deadline = time.monotonic() + 60

        def leader_up() -> bool:  # the super user's write goes through once it has one
            try:
                return httpx.put(f"{url}/config", json={"compatibility": "BACKWARD"},
                                 timeout=35, auth=("admin", "root")).status_code == 200
            except httpx.HTTPError:
                return False

        while not leader_up():
            assert time.monotonic() < deadline and broker.alive(), broker.logs()
            time.sleep(0.1)
        added = CliRunner().invoke(schemas.app, [
            "acl", "add", "-b", broker.bootstrap, "--principal", "User:alice",
            "-o", "write", "-o", "read", "--subject", "orders-value"])
        assert added.exit_code == 0, added.output
        alice = SchemaRegistryClient({"url": url, "basic.auth.user.info": "alice:a-secret"})
        bob = SchemaRegistryClient({"url": url, "basic.auth.user.info": "bob:b-secret"})
        while True:  # the ACL reaches the registry through its topic
            try:
                alice.register_schema("orders-value", schema)
                break
            except SchemaRegistryError as e:
                assert e.http_status_code == 403 and time.monotonic() < deadline, e
                time.sleep(0.05)
        with pytest.raises(SchemaRegistryError) as denied:
            bob.register_schema("orders-value", schema)
        assert denied.value.http_status_code == 403
        assert denied.value.error_code == 40301
        assert alice.get_versions("orders-value") == [1]  # nothing written for bob
    finally:
        broker.stop()


def test_hosted_authorization_needs_the_users_file(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", overrides={
        "schema.registry.listeners": f"http://127.0.0.1:{free_port()}",
        "schema.registry.enable.authorization": "true"})
    with pytest.raises(RuntimeError):
        broker.start()
    assert "schema.registry.enable.authorization needs schema.registry.basic.auth.file" \
        in broker.logs()


def test_registry_settings_without_a_hosted_registry_are_refused() -> None:
    with pytest.raises(ConfigError, match="set for a hosted schema registry, but"):
        BrokerConfig.load(overrides={"schema.registry.enable.authorization": "true"})


def test_the_test_kits_broker_refuses_a_registry_it_does_not_host(tmp_path: Path) -> None:
    from odradek.testing import EmbeddedBroker
    from odradek.testing.config import TestkitError

    broker = EmbeddedBroker({"schema.registry.listeners": f"http://127.0.0.1:{free_port()}"},
                            data_dir=tmp_path)
    with pytest.raises(TestkitError, match="this process hosts no schema registry"):
        broker.start()
    broker.stop()
