"""Several registry instances and restarts: the same ids everywhere, writes forwarded to
the elected leader, and a topic written by Confluent's registry read as it is."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient

from tests.conftest import BrokerProcess
from tests.registry.conftest import RegistryProcess, api


def avro(n: int) -> str:
    return json.dumps({"type": "record", "name": f"R{n}", "fields": [
        {"name": "a", "type": "int"}]})


def test_restart_and_a_second_instance_serve_the_same_ids(
        broker: BrokerProcess, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    topic, group = f"_schemas-{tag}", f"sr-{tag}"
    first = RegistryProcess(broker.bootstrap, tmp_path, topic, group)
    second = RegistryProcess(broker.bootstrap, tmp_path, topic, group)
    try:
        first.start().wait_for_leader()
        ids = {f"a-{n}": api("POST", f"{first.url}/subjects/a-{n}/versions",
                             {"schema": avro(n)}).json()["id"] for n in range(3)}
        first.stop()
        first.start().wait_for_leader()
        for subject, schema_id in ids.items():
            got = api("GET", f"{first.url}/subjects/{subject}/versions/1").json()
            assert got["id"] == schema_id
        # a new schema after the restart gets a new id, never a reused one
        fresh = api("POST", f"{first.url}/subjects/b/versions", {"schema": avro(9)}).json()
        assert fresh["id"] > max(ids.values())

        second.start().wait_for_leader()
        client = SchemaRegistryClient({"url": second.url})
        for subject, schema_id in ids.items():
            assert client.get_latest_version(subject).schema_id == schema_id
        # writes to either instance land through the one leader: ids never collide
        def register(n: int) -> int:
            target = first if n % 2 else second
            r = api("POST", f"{target.url}/subjects/c-{n}/versions", {"schema": avro(100 + n)})
            assert r.status_code == 200, r.text
            return int(r.json()["id"])

        with ThreadPoolExecutor(4) as pool:
            new_ids = list(pool.map(register, range(12)))
        assert len(set(new_ids)) == 12
        assert not set(new_ids) & (set(ids.values()) | {fresh["id"]})
        for n, schema_id in enumerate(new_ids):
            for instance in (first, second):
                assert api("GET", f"{instance.url}/subjects/c-{n}/versions/1").json()[
                    "id"] == schema_id

        # the leader leaves: the other instance takes over the writes
        leader, follower = (first, second) if first.url < second.url else (second, first)
        leader.stop()
        follower.wait_for_leader()
        after = api("POST", f"{follower.url}/subjects/d/versions", {"schema": avro(500)})
        assert after.status_code == 200 and after.json()["id"] > max(new_ids)
    finally:
        first.stop()
        second.stop()


def confluent_record(key: dict[str, object], value: dict[str, object] | None
                     ) -> tuple[bytes, bytes | None]:
    return (json.dumps(key).encode(), None if value is None else json.dumps(value).encode())


def test_a_topic_written_by_confluents_registry_is_served(
        broker: BrokerProcess, tmp_path: Path) -> None:
    topic = f"_schemas-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # alive until the result
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})]
                        )[topic].result(30)
    proto = 'syntax = "proto3";\npackage x;\n\nmessage M {\n  string a = 1;\n}\n'
    records = [
        confluent_record({"keytype": "NOOP", "magic": 0}, None),
        confluent_record({"keytype": "CONFIG", "subject": None, "magic": 0},
                         {"compatibilityLevel": "FULL"}),
        confluent_record({"keytype": "SCHEMA", "subject": "orders-value", "version": 1,
                          "magic": 1},
                         {"subject": "orders-value", "version": 1, "id": 11,
                          "schema": avro(1), "deleted": False}),
        confluent_record({"keytype": "SCHEMA", "subject": "orders-value", "version": 2,
                          "magic": 1},
                         {"subject": "orders-value", "version": 2, "id": 12,
                          "schema": avro(2), "deleted": False}),
        confluent_record({"keytype": "SCHEMA", "subject": "events-value", "version": 1,
                          "magic": 1},
                         {"subject": "events-value", "version": 1, "id": 20,
                          "schemaType": "PROTOBUF", "schema": proto, "deleted": False}),
        confluent_record({"keytype": "SCHEMA", "subject": "old-value", "version": 1,
                          "magic": 1},
                         {"subject": "old-value", "version": 1, "id": 5,
                          "schema": avro(5), "deleted": False}),
        confluent_record({"keytype": "DELETE_SUBJECT", "subject": "old-value", "magic": 0},
                         {"subject": "old-value", "version": 1}),
        confluent_record({"keytype": "CONFIG", "subject": "orders-value", "magic": 0},
                         {"compatibilityLevel": "NONE"}),
    ]
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0
    registry = RegistryProcess(broker.bootstrap, tmp_path, topic, f"sr-{topic}")
    try:
        registry.start().wait_for_leader(level="FULL")  # the level it already has
        url = registry.url
        assert api("GET", f"{url}/subjects").json() == ["events-value", "orders-value"]
        assert api("GET", f"{url}/subjects", deleted="true").json() == [
            "events-value", "old-value", "orders-value"]
        assert api("GET", f"{url}/subjects/orders-value/versions/latest").json()["id"] == 12
        assert api("GET", f"{url}/schemas/ids/20").json()["schemaType"] == "PROTOBUF"
        assert api("GET", f"{url}/config").json() == {"compatibilityLevel": "FULL"}
        assert api("GET", f"{url}/config/orders-value").json() == {
            "compatibilityLevel": "NONE"}
        # the next id follows the highest one Confluent assigned
        assert api("POST", f"{url}/subjects/new/versions", {"schema": avro(7)}).json()[
            "id"] == 21
    finally:
        registry.stop()
