"""confluent-kafka's SchemaRegistryClient and its Avro, JSON and Protobuf serdes, unchanged,
against odradek's registry and an odradek broker: register, evolve, produce, consume,
look up by id, delete."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tests.conftest import BrokerProcess
from tests.registry.conftest import RegistryProcess

USER_V1 = """{"type": "record", "name": "User", "namespace": "demo", "fields": [
  {"name": "name", "type": "string"},
  {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
     {"name": "city", "type": "string"}]}}]}"""
# compatible: a new field with a default
USER_V2 = """{"type": "record", "name": "User", "namespace": "demo", "fields": [
  {"name": "name", "type": "string"},
  {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
     {"name": "city", "type": "string"}]}},
  {"name": "age", "type": ["null", "int"], "default": null}]}"""
# incompatible: a new field without a default cannot be read from v2's data
USER_BAD = """{"type": "record", "name": "User", "namespace": "demo", "fields": [
  {"name": "name", "type": "string"}, {"name": "email", "type": "string"}]}"""


def roundtrip(bootstrap: str, topic: str, values: list[bytes]) -> list[bytes]:
    """Produce the values and read them back from the topic's start."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    errors: list[object] = []
    for v in values:
        producer.produce(topic, value=v, partition=0,
                         on_delivery=lambda err, _: errors.append(err) if err else None)
    assert producer.flush(30) == 0 and errors == []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is not None and m.error() is None:
                got.append(bytes(m.value() or b""))
        return got
    finally:
        consumer.close()


def test_avro_register_evolve_produce_consume_delete(
        broker: BrokerProcess, registry: RegistryProcess, topic_name: str) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    subject = f"{topic_name}-value"

    first = AvroSerializer(client, USER_V1)(
        {"name": "ada", "address": {"city": "London"}}, ctx)
    second = AvroSerializer(client, USER_V2)(
        {"name": "bob", "address": {"city": "Paris"}, "age": 41}, ctx)
    assert first is not None and second is not None
    assert first[0] == 0 and second[0] == 0  # Confluent's framing: magic 0, then the id
    id1, id2 = int.from_bytes(first[1:5], "big"), int.from_bytes(second[1:5], "big")
    assert id1 != id2
    assert client.get_versions(subject) == [1, 2]

    with pytest.raises(SchemaRegistryError) as bad:
        client.register_schema(subject, Schema(USER_BAD, "AVRO"))
    assert bad.value.http_status_code == 409 and bad.value.error_code == 40901
    assert client.get_versions(subject) == [1, 2]  # nothing was written for it

    consumed = roundtrip(broker.bootstrap, topic_name, [first, second])
    reader = AvroDeserializer(client)  # the writer's schema, fetched by id
    assert [reader(v, ctx) for v in consumed] == [
        {"name": "ada", "address": {"city": "London"}},
        {"name": "bob", "address": {"city": "Paris"}, "age": 41}]
    # the v2 reader reads v1's records with the default filled in
    evolved = AvroDeserializer(client, USER_V2)
    assert evolved(consumed[0], ctx) == {"name": "ada", "address": {"city": "London"},
                                          "age": None}

    assert client.get_schema(id1).schema_str is not None
    latest = client.get_latest_version(subject)
    assert (latest.version, latest.schema_id) == (2, id2)
    assert client.lookup_schema(subject, Schema(USER_V1, "AVRO")).version == 1

    assert client.delete_version(subject, 2) == 2
    assert client.get_versions(subject) == [1]
    assert client.delete_subject(subject) == [1]
    assert subject not in client.get_subjects()
    assert client.delete_subject(subject, permanent=True) == [1, 2]
    with pytest.raises(SchemaRegistryError) as gone:
        client.get_versions(subject)
    assert gone.value.error_code == 40401


PERSON = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Person",
          "type": "object", "additionalProperties": False,
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name"]}


def test_json_schema_register_evolve_produce_consume(
        broker: BrokerProcess, registry: RegistryProcess, topic_name: str) -> None:
    import json

    client = SchemaRegistryClient({"url": registry.url})
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    subject = f"{topic_name}-value"
    v1 = JSONSerializer(json.dumps(PERSON), client)({"name": "ada", "age": 36}, ctx)
    # a closed content model may gain an optional property (old data cannot have it)
    wider: dict[str, Any] = json.loads(json.dumps(PERSON))
    wider["properties"]["email"] = {"type": "string"}
    v2 = JSONSerializer(json.dumps(wider), client)({"name": "bob", "email": "b@x"}, ctx)
    assert v1 is not None and v2 is not None
    assert client.get_versions(subject) == [1, 2]
    # making a property required breaks reading old documents that lack it
    stricter = json.loads(json.dumps(wider))
    stricter["required"] = ["name", "email"]
    with pytest.raises(SchemaRegistryError) as bad:
        client.register_schema(subject, Schema(json.dumps(stricter), "JSON"))
    assert bad.value.error_code == 40901
    # a validation error on the client, before anything is produced
    from confluent_kafka.serialization import SerializationError
    with pytest.raises(SerializationError):
        JSONSerializer(json.dumps(wider), client)({"age": "old"}, ctx)

    consumed = roundtrip(broker.bootstrap, topic_name, [v1, v2])
    reader = JSONDeserializer(None, schema_registry_client=client)
    assert [reader(v, ctx) for v in consumed] == [{"name": "ada", "age": 36},
                                                  {"name": "bob", "email": "b@x"}]
    registered = client.get_schema(int.from_bytes(v2[1:5], "big"))
    assert registered.schema_type == "JSON"
    assert json.loads(registered.schema_str or "{}")["properties"]["email"] == {
        "type": "string"}


def proto_classes(package: str, with_city: bool = False) -> tuple[Any, Any]:
    """Message classes built at run time: `Order` in order.proto imports `Address` from
    address.proto (so the serializer registers a reference)."""
    pool = descriptor_pool.DescriptorPool()
    F = descriptor_pb2.FieldDescriptorProto
    address = descriptor_pb2.FileDescriptorProto(name=f"{package}/address.proto",
                                                  package=package, syntax="proto3")
    msg = address.message_type.add(name="Address")
    msg.field.add(name="street", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    if with_city:
        msg.field.add(name="city", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    order = descriptor_pb2.FileDescriptorProto(name=f"{package}/order.proto",
                                               package=package, syntax="proto3",
                                               dependency=[address.name])
    m = order.message_type.add(name="Order")
    m.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    m.field.add(name="ship_to", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                type_name=f".{package}.Address")
    m.field.add(name="items", number=3, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    pool.Add(address)
    pool.Add(order)
    return (message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.Order")),
            message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.Address")))


def test_protobuf_with_a_reference_register_produce_consume(
        broker: BrokerProcess, registry: RegistryProcess, topic_name: str) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    package = f"shop{uuid.uuid4().hex[:6]}"
    Order, Address = proto_classes(package)
    serialize = ProtobufSerializer(Order, client, {"use.deprecated.format": False})
    data = serialize(Order(id=7, ship_to=Address(street="Main St"), items=["a", "b"]), ctx)
    assert data is not None

    latest = client.get_latest_version(f"{topic_name}-value")
    assert latest.schema.schema_type == "PROTOBUF"
    refs = latest.schema.references or []
    assert [(r.name, r.subject) for r in refs] == [(f"{package}/address.proto",
                                                    f"{package}/address.proto")]
    text = latest.schema.schema_str or ""
    assert "message Order" in text and f"import \"{package}/address.proto\"" in text

    consumed = roundtrip(broker.bootstrap, topic_name, [data])
    # the deserializer fetches the writer's schema by id (format=serialized) and refs
    deserialize = ProtobufDeserializer(Order, {"use.deprecated.format": False}, client)
    got = deserialize(consumed[0], ctx)
    assert (got.id, got.ship_to.street, list(got.items)) == (7, "Main St", ["a", "b"])

    # a compatible change in the referenced file: a new field
    Order2, Address2 = proto_classes(package, with_city=True)
    data2 = ProtobufSerializer(Order2, client, {"use.deprecated.format": False})(
        Order2(id=8, ship_to=Address2(street="High St", city="Leeds")), ctx)
    assert data2 is not None
    assert client.get_versions(f"{package}/address.proto") == [1, 2]
    got2 = deserialize(data2, ctx)  # an old reader skips the unknown field
    assert (got2.id, got2.ship_to.street) == (8, "High St")
