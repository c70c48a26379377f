"""The lake's decoder of Confluent-framed values: bytes written by confluent-kafka's Avro,
JSON and Protobuf serializers, decoded by schema id through odradek's registry."""

from __future__ import annotations

import json
import pickle
import uuid

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.pipeline.registry_values import FramedDecoder
from tests.registry.conftest import RegistryProcess
from tests.registry.test_serializers import PERSON, USER_V1, USER_V2, proto_classes


def test_values_decode_by_schema_id_in_every_format(registry: RegistryProcess) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    topic = f"t-{uuid.uuid4().hex[:8]}"
    ctx = SerializationContext(topic, MessageField.VALUE)
    decoder = pickle.loads(pickle.dumps(FramedDecoder(registry.url)))  # as a Spark task

    v1 = AvroSerializer(client, USER_V1)({"name": "ada", "address": {"city": "Oslo"}}, ctx)
    v2 = AvroSerializer(client, USER_V2)({"name": "bo", "address": {"city": "Rome"},
                                           "age": 3}, ctx)
    assert v1 is not None and v2 is not None
    assert json.loads(decoder.decode(v1)[0]) == {"name": "ada", "address": {"city": "Oslo"}}
    assert json.loads(decoder.decode(v2)[0])["age"] == 3  # each record by its own id

    jctx = SerializationContext(f"{topic}-j", MessageField.VALUE)
    jv = JSONSerializer(json.dumps(PERSON), client)({"name": "cy", "age": 9}, jctx)
    assert jv is not None
    assert json.loads(decoder.decode(jv)[0]) == {"name": "cy", "age": 9}

    Order, Address = proto_classes(f"lake{uuid.uuid4().hex[:6]}")
    pctx = SerializationContext(f"{topic}-p", MessageField.VALUE)
    pv = ProtobufSerializer(Order, client, {"use.deprecated.format": False})(
        Order(id=5, ship_to=Address(street="Elm"), items=["x"]), pctx)
    assert pv is not None
    assert json.loads(decoder.decode(pv)[0]) == {"id": "5", "ship_to": {"street": "Elm"},
                                                 "items": ["x"]}

    # quarantined, with a reason: an unknown id, bytes that do not decode, no framing
    unknown = b"\x00" + (10**6).to_bytes(4, "big") + v1[5:]
    assert decoder.decode(unknown) == (None, "schema id 1000000 is not in the registry")
    json_text, why = decoder.decode(v1[:5] + b"\xff\xff\xff")
    assert json_text is None and why is not None and why.startswith("not a record of schema")
    assert decoder.decode(b'{"plain": "json"}')[1] == (
        "not in Confluent's wire format (no magic byte and schema id)")
    assert decoder.decode(None) == (None, None)
