"""Confluent's REST API as a client sees it: paths, bodies, status codes, error codes, and
bad input that leaves nothing half-written in `_schemas`."""

from __future__ import annotations

import json

import httpx
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.conftest import BrokerProcess
from tests.registry.conftest import CONTENT_TYPE, RegistryProcess, api

AVRO = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
AVRO_B = json.dumps({"type": "record", "name": "R", "fields": [
    {"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": ""}]})


def end_offset(broker: BrokerProcess, topic: str) -> int:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "probe"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), 10)[1])
    finally:
        c.close()


def test_register_and_read_back_every_way(registry: RegistryProcess, subject: str) -> None:
    url = registry.url
    r = api("POST", f"{url}/subjects/{subject}/versions", {"schema": AVRO})
    assert r.status_code == 200 and r.headers["content-type"].startswith(CONTENT_TYPE)
    schema_id = r.json()["id"]
    # the same schema again: the same id, no new version
    assert api("POST", f"{url}/subjects/{subject}/versions", {"schema": AVRO}).json() == {
        "id": schema_id}
    # the same schema in another subject keeps its id
    other = f"{subject}-other"
    assert api("POST", f"{url}/subjects/{other}/versions", {"schema": AVRO}).json()[
        "id"] == schema_id

    assert api("GET", f"{url}/subjects/{subject}/versions").json() == [1]
    got = api("GET", f"{url}/subjects/{subject}/versions/latest").json()
    assert got == {"subject": subject, "version": 1, "id": schema_id, "schema": AVRO.replace(
        " ", "")}
    assert json.loads(api("GET", f"{url}/subjects/{subject}/versions/1/schema").text) == \
        json.loads(AVRO)
    assert json.loads(api("GET", f"{url}/schemas/ids/{schema_id}").json()["schema"]) == \
        json.loads(AVRO)
    assert json.loads(api("GET", f"{url}/schemas/ids/{schema_id}/schema").text) == \
        json.loads(AVRO)
    assert api("GET", f"{url}/schemas/ids/{schema_id}/subjects").json() == sorted(
        [subject, other])
    assert {"subject": other, "version": 1} in api(
        "GET", f"{url}/schemas/ids/{schema_id}/versions").json()
    assert subject in api("GET", f"{url}/subjects").json()
    assert api("GET", f"{url}/subjects", subjectPrefix=f"{subject}-").json() == [other]
    assert sorted(api("GET", f"{url}/schemas/types").json()) == ["AVRO", "JSON", "PROTOBUF"]
    # lookup: a different spelling of the same schema finds it
    spaced = json.dumps(json.loads(AVRO), indent=2)
    found = api("POST", f"{url}/subjects/{subject}", {"schema": spaced}).json()
    assert (found["version"], found["id"]) == (1, schema_id)
    assert api("POST", f"{url}/subjects/{subject}", {"schema": AVRO_B}).json()[
        "error_code"] == 40403


def test_compatibility_and_config(registry: RegistryProcess, subject: str) -> None:
    url = registry.url
    api("POST", f"{url}/subjects/{subject}/versions", {"schema": AVRO})
    check = f"{url}/compatibility/subjects/{subject}/versions/latest"
    assert api("POST", check, {"schema": AVRO_B}).json() == {"is_compatible": True}
    dropped = json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "c", "type": "int"}]})
    verdict = api("POST", check, {"schema": dropped}, verbose="true").json()
    assert verdict["is_compatible"] is False and verdict["messages"]

    assert api("GET", f"{url}/config/{subject}").json()["error_code"] == 40408
    assert api("GET", f"{url}/config/{subject}", defaultToGlobal="true").json() == {
        "compatibilityLevel": "BACKWARD"}
    assert api("PUT", f"{url}/config/{subject}", {"compatibility": "none"}).json() == {
        "compatibility": "NONE"}
    assert api("GET", f"{url}/config/{subject}").json() == {"compatibilityLevel": "NONE"}
    assert api("POST", check, {"schema": dropped}).json() == {"is_compatible": True}
    bad = api("PUT", f"{url}/config/{subject}", {"compatibility": "SIDEWAYS"})
    assert (bad.status_code, bad.json()["error_code"]) == (422, 42203)
    assert api("DELETE", f"{url}/config/{subject}").json() == {"compatibilityLevel": "NONE"}
    assert api("GET", f"{url}/config/{subject}").status_code == 404

    assert api("GET", f"{url}/mode").json() == {"mode": "READWRITE"}
    assert api("PUT", f"{url}/mode/{subject}", {"mode": "READONLY"}).json() == {
        "mode": "READONLY"}
    frozen = api("POST", f"{url}/subjects/{subject}/versions", {"schema": AVRO_B})
    assert (frozen.status_code, frozen.json()["error_code"]) == (422, 42205)
    assert api("PUT", f"{url}/mode/{subject}", {"mode": "SOMETIMES"}).json()[
        "error_code"] == 42204
    assert api("DELETE", f"{url}/mode/{subject}").json() == {"mode": "READONLY"}
    assert api("POST", f"{url}/subjects/{subject}/versions", {"schema": AVRO_B}).status_code \
        == 200


def test_soft_and_hard_deletes_answer_confluents_codes(registry: RegistryProcess,
                                                        subject: str) -> None:
    url = registry.url
    api("POST", f"{url}/subjects/{subject}/versions", {"schema": AVRO})
    api("POST", f"{url}/subjects/{subject}/versions", {"schema": AVRO_B})
    assert api("DELETE", f"{url}/subjects/{subject}/versions/2", permanent="true").json()[
        "error_code"] == 40407
    assert api("DELETE", f"{url}/subjects/{subject}/versions/2").json() == 2
    assert api("DELETE", f"{url}/subjects/{subject}/versions/2").json()["error_code"] == 40406
    assert api("GET", f"{url}/subjects/{subject}/versions").json() == [1]
    assert api("GET", f"{url}/subjects/{subject}/versions", deleted="true").json() == [1, 2]
    assert api("GET", f"{url}/subjects/{subject}/versions/2").json()["error_code"] == 40402
    assert api("GET", f"{url}/subjects/{subject}/versions/2", deleted="true").json()[
        "version"] == 2
    assert api("DELETE", f"{url}/subjects/{subject}", permanent="true").json()[
        "error_code"] == 40405
    assert api("DELETE", f"{url}/subjects/{subject}").json() == [1]
    assert api("DELETE", f"{url}/subjects/{subject}").json()["error_code"] == 40404
    assert subject in api("GET", f"{url}/subjects", deleted="true").json()
    assert api("DELETE", f"{url}/subjects/{subject}", permanent="true").json() == [1, 2]
    assert api("GET", f"{url}/subjects/{subject}/versions").json()["error_code"] == 40401
    # a new registration after a hard delete starts the subject again
    assert api("POST", f"{url}/subjects/{subject}/versions", {"schema": AVRO}).status_code \
        == 200
    assert api("GET", f"{url}/subjects/{subject}/versions").json() == [1]


def test_references_and_referenced_by(registry: RegistryProcess, subject: str) -> None:
    url = registry.url
    address = json.dumps({"type": "record", "name": "Address", "namespace": "x",
                          "fields": [{"name": "city", "type": "string"}]})
    person = json.dumps({"type": "record", "name": "Person", "namespace": "x",
                         "fields": [{"name": "home", "type": "x.Address"}]})
    dep = f"{subject}-address"
    dep_id = api("POST", f"{url}/subjects/{dep}/versions", {"schema": address}).json()["id"]
    # without the reference the name cannot resolve
    assert api("POST", f"{url}/subjects/{subject}/versions", {"schema": person}).json()[
        "error_code"] == 42201
    ref = [{"name": "x.Address", "subject": dep, "version": 1}]
    pid = api("POST", f"{url}/subjects/{subject}/versions",
              {"schema": person, "references": ref}).json()["id"]
    assert api("GET", f"{url}/schemas/ids/{pid}").json()["references"] == ref
    assert api("GET", f"{url}/subjects/{dep}/versions/1/referencedby").json() == [pid]
    assert dep_id != pid
    blocked = api("DELETE", f"{url}/subjects/{dep}")
    assert (blocked.status_code, blocked.json()["error_code"]) == (422, 42206)
    missing = [{"name": "x.Address", "subject": dep, "version": 9}]
    assert api("POST", f"{url}/subjects/{subject}/versions",
               {"schema": person, "references": missing}).json()["error_code"] == 42201


def test_bad_input_gets_confluents_codes_and_writes_nothing(
        broker: BrokerProcess, registry: RegistryProcess, subject: str) -> None:
    url = registry.url
    api("POST", f"{url}/subjects/{subject}/versions", {"schema": AVRO})
    before = end_offset(broker, registry.topic)
    versions = f"{url}/subjects/{subject}/versions"
    cases = [
        (api("POST", versions, {"schema": "{\"type\": \"record\"}"}), 422, 42201),
        (api("POST", versions, {"schema": "{\"type\": \"object\", \"properties\": 3}",
                                "schemaType": "JSON"}), 422, 42201),
        (api("POST", versions, {"schema": "message {", "schemaType": "PROTOBUF"}), 422, 42201),
        (api("POST", versions, {"schema": AVRO, "schemaType": "XML"}), 422, 42201),
        (api("POST", versions, {"schema": AVRO.replace('"int"', '"string"')}), 409, 40901),
        (api("POST", f"{url}/subjects/bad%0Aname/versions", {"schema": AVRO}), 422, 42208),
        (api("GET", f"{versions}/zero"), 422, 42202),
        (api("GET", f"{versions}/0"), 422, 42202),
        (api("GET", f"{url}/schemas/ids/999999"), 404, 40403),
        (api("GET", f"{url}/subjects/{subject}-nope/versions"), 404, 40401),
        (api("GET", f"{versions}/7"), 404, 40402),
        (api("POST", versions, {"schema": "x" * (2 << 20)}), 422, 42209),
        (api("PUT", f"{url}/config", {"compatibility": 7}), 422, 42203),
    ]
    malformed = httpx.post(versions, content=b"{\"schema\": ",
                           headers={"Content-Type": CONTENT_TYPE})
    cases.append((malformed, 400, 400))
    for response, status, code in cases:
        assert (response.status_code, response.json().get("error_code")) == (status, code), \
            f"{response.request.method} {response.request.url}: {response.text[:300]}"
        assert response.json()["message"]
    assert end_offset(broker, registry.topic) == before
    assert api("GET", versions).json() == [1]


def test_json_schema_and_protobuf_formats(registry: RegistryProcess, subject: str) -> None:
    url = registry.url
    open_model = json.dumps({"type": "object", "properties": {"a": {"type": "string"}}})
    api("POST", f"{url}/subjects/{subject}-json/versions",
        {"schema": open_model, "schemaType": "JSON"})
    # Confluent's rule: a property added to an open content model is incompatible
    added = json.dumps({"type": "object", "properties": {"a": {"type": "string"},
                                                         "b": {"type": "integer"}}})
    r = api("POST", f"{url}/subjects/{subject}-json/versions",
            {"schema": added, "schemaType": "JSON"})
    assert r.json()["error_code"] == 40901 and "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL" in \
        r.json()["message"]
    draft2020 = json.dumps({"$schema": "https://json-schema.org/draft/2020-12/schema",
                            "type": "array", "prefixItems": [{"type": "string"}]})
    assert api("POST", f"{url}/subjects/{subject}-j2/versions",
               {"schema": draft2020, "schemaType": "JSON"}).status_code == 200

    proto = 'syntax = "proto3";\npackage p;\nmessage M {\n  string a = 1;\n  int32 n = 2;\n}\n'
    pid = api("POST", f"{url}/subjects/{subject}-proto/versions",
              {"schema": proto, "schemaType": "PROTOBUF"}).json()["id"]
    served = api("GET", f"{url}/schemas/ids/{pid}").json()
    assert served["schemaType"] == "PROTOBUF" and "message M" in served["schema"]
    serialized = api("GET", f"{url}/schemas/ids/{pid}", format="serialized").json()["schema"]
    # the base64 descriptor of the same schema is the same schema: same id, no new version
    again = api("POST", f"{url}/subjects/{subject}-proto/versions",
                {"schema": serialized, "schemaType": "PROTOBUF"}).json()
    assert again == {"id": pid}
    renumbered = proto.replace("int32 n = 2", "string n = 2")
    assert api("POST", f"{url}/subjects/{subject}-proto/versions",
               {"schema": renumbered, "schemaType": "PROTOBUF"}).json()["error_code"] == 40901
    widened = proto.replace("int32 n = 2", "int64 n = 2")
    assert api("POST", f"{url}/subjects/{subject}-proto/versions",
               {"schema": widened, "schemaType": "PROTOBUF"}).status_code == 200


def test_schemas_topic_holds_confluents_records(broker: BrokerProcess,
                                                registry: RegistryProcess,
                                                subject: str) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer

    url = registry.url
    sid = api("POST", f"{url}/subjects/{subject}/versions", {"schema": AVRO}).json()["id"]
    api("PUT", f"{url}/config/{subject}", {"compatibility": "FULL"})
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "probe"})
    try:
        c.assign([TopicPartition(registry.topic, 0, OFFSET_BEGINNING)])
        seen: dict[bytes, bytes | None] = {}
        end, last = end_offset(broker, registry.topic), -1
        while last < end - 1:
            m = c.poll(5)
            assert m is not None
            seen[bytes(m.key() or b"")] = m.value()
            last = m.offset() or 0
    finally:
        c.close()
    key = json.dumps({"keytype": "SCHEMA", "subject": subject, "version": 1, "magic": 1},
                     separators=(",", ":")).encode()
    value = json.loads(seen[key] or b"{}")
    assert value == {"subject": subject, "version": 1, "id": sid,
                     "schema": json.dumps(json.loads(AVRO), separators=(",", ":")),
                     "deleted": False}
    config = json.dumps({"keytype": "CONFIG", "subject": subject, "magic": 0},
                        separators=(",", ":")).encode()
    assert json.loads(seen[config] or b"{}") == {"compatibilityLevel": "FULL"}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, registry.topic)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["cleanup.policy"].value == "compact"


def test_import_mode_keeps_given_ids_and_versions(registry: RegistryProcess,
                                                   subject: str) -> None:
    url = registry.url
    versions = f"{url}/subjects/{subject}/versions"
    refused = api("POST", versions, {"schema": AVRO, "id": 70001})
    assert (refused.status_code, refused.json()["error_code"]) == (422, 42205)
    assert api("PUT", f"{url}/mode/{subject}", {"mode": "IMPORT"}).json() == {
        "mode": "IMPORT"}
    assert api("POST", versions, {"schema": AVRO, "id": 70001, "version": 3}).json() == {
        "id": 70001}
    got = api("GET", f"{versions}/3").json()
    assert (got["id"], got["version"]) == (70001, 3)
    clash = api("POST", versions, {"schema": AVRO_B, "id": 70001, "version": 4})
    assert (clash.status_code, clash.json()["error_code"]) == (422, 42207)
    api("DELETE", f"{url}/mode/{subject}")
    # ids assigned afterwards continue above the imported one
    unseen = AVRO_B.replace('"name": "R"', f'"name": "R{subject.replace("-", "_")}"')
    fresh = api("POST", f"{url}/subjects/{subject}-new/versions", {"schema": unseen}).json()[
        "id"]
    assert fresh > 70001
    assert api("GET", versions).json() == [3]
