"""The formats and Confluent's compatibility rules, without a broker."""

from __future__ import annotations

import json

import pytest
from google.protobuf import descriptor_pb2

from odradek.registry.compatibility import check_compatibility
from odradek.registry.errors import InvalidSchema
from odradek.registry.formats import parse_schema
from odradek.registry.formats.base import ResolvedReference
from odradek.registry.formats.proto_text import to_proto_text
from odradek.registry.formats.protobuf_format import ProtobufSchema


def avro(*fields: dict[str, object], name: str = "R") -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields)})


A = {"name": "a", "type": "int"}
B_DEFAULT = {"name": "b", "type": "string", "default": "x"}
B = {"name": "b", "type": "string"}


@pytest.mark.parametrize(("level", "old", "new", "ok"), [
    ("BACKWARD", [avro(A)], avro(A, B_DEFAULT), True),
    ("BACKWARD", [avro(A)], avro(A, B), False),  # the reader's new field has no default
    ("FORWARD", [avro(A)], avro(A, B), True),  # old readers ignore the new field
    ("FORWARD", [avro(A, B)], avro(A), False),  # old readers need b
    ("FULL", [avro(A)], avro(A, B_DEFAULT), True),
    ("FULL", [avro(A)], avro(A, B), False),
    ("NONE", [avro(A)], avro({"name": "a", "type": "string"}), True),
    # int promotes to long when reading; long does not narrow to int
    ("BACKWARD", [avro(A)], avro({"name": "a", "type": "long"}), True),
    ("BACKWARD", [avro({"name": "a", "type": "long"})], avro(A), False),
    # non-transitive levels compare with the latest only; transitive ones with all
    ("BACKWARD", [avro(A, B), avro(A)], avro(A, {"name": "b", "type": "int",
                                                 "default": 0}), True),
    ("BACKWARD_TRANSITIVE", [avro(A, B), avro(A)],
     avro(A, {"name": "b", "type": "int", "default": 0}), False),
])
def test_avro_levels(level: str, old: list[str], new: str, ok: bool) -> None:
    previous = [parse_schema("AVRO", s) for s in old]
    assert (check_compatibility(level, parse_schema("AVRO", new), previous) == []) is ok


def test_avro_invalid_and_canonical_forms() -> None:
    with pytest.raises(InvalidSchema, match="Invalid schema"):
        parse_schema("AVRO", '{"type": "record", "name": "R"}')
    with pytest.raises(InvalidSchema):
        parse_schema("AVRO", '{"type": "enum", "name": "E", "symbols": ["A", "A"]}')
    spaced = parse_schema("AVRO", avro(A))
    assert spaced.canonical() == avro(A).replace(" ", "")
    reordered = json.dumps({"fields": [A], "name": "R", "type": "record"})
    assert parse_schema("AVRO", reordered).normalized().canonical() == \
        spaced.normalized().canonical()
    assert parse_schema("AVRO", '"string"').canonical() == '"string"'


def js(schema: dict[str, object]) -> str:
    return json.dumps(schema)


OBJ = {"type": "object", "properties": {"a": {"type": "string"}}}
CLOSED = {**OBJ, "additionalProperties": False}


@pytest.mark.parametrize(("old", "new", "ok"), [
    (OBJ, {"type": "object", "properties": {}}, True),  # removed from an open model
    (OBJ, {"type": "object", "properties": {"a": {"type": "string"},
                                            "b": {"type": "string"}}}, False),
    (CLOSED, {**CLOSED, "properties": {"a": {"type": "string"},
                                       "b": {"type": "string"}}}, True),
    (CLOSED, {**CLOSED, "required": ["a"]}, False),
    (OBJ, {**OBJ, "additionalProperties": False}, False),
    ({"type": "integer"}, {"type": "number"}, True),
    ({"type": "number"}, {"type": "integer"}, False),
    ({"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 3}, False),
    ({"type": "string", "enum": ["x"]}, {"type": "string", "enum": ["x", "y"]}, True),
    ({"type": "string", "enum": ["x", "y"]}, {"type": "string", "enum": ["x"]}, False),
    ({"type": "array", "items": {"type": "integer"}},
     {"type": "array", "items": {"type": "string"}}, False),
])
def test_json_schema_backward(old: dict[str, object], new: dict[str, object],
                              ok: bool) -> None:
    verdict = check_compatibility("BACKWARD", parse_schema("JSON", js(new)),
                                  [parse_schema("JSON", js(old))])
    assert (verdict == []) is ok, verdict


def test_json_schema_drafts_and_invalid() -> None:
    parse_schema("JSON", js({"$schema": "https://json-schema.org/draft/2020-12/schema",
                             "type": "object", "$defs": {"x": {"type": "string"}}}))
    with pytest.raises(InvalidSchema):
        parse_schema("JSON", js({"type": "object", "required": "a"}))
    with pytest.raises(InvalidSchema):
        parse_schema("JSON", "[1, 2]")
    with pytest.raises(InvalidSchema):
        parse_schema("JSON", js({"$schema": "http://example.com/not-a-draft"}))


PROTO = """syntax = "proto3";
package shop.v1;

import "google/protobuf/timestamp.proto";

message Order {
  int64 id = 1;
  repeated string items = 2;
  map<string, int32> counts = 3;
  google.protobuf.Timestamp at = 4;
  oneof pay {
    string card = 5;
    string cash = 6;
  }
  optional string note = 7;
  Status status = 8;
  message Line { bytes sku = 1; }
  enum Status { NEW = 0; PAID = 1; }
  reserved 20 to 25;
}
"""


def test_protobuf_text_and_descriptor_are_one_schema() -> None:
    parsed = ProtobufSchema(PROTO)
    printed = parsed.canonical()
    again = ProtobufSchema(printed)
    # the printed text compiles to the very same descriptor (names aside)
    assert again.descriptor == parsed.descriptor
    from_b64 = ProtobufSchema(parsed.formatted("serialized"))
    assert from_b64.canonical() == printed
    assert "map<string, int32> counts = 3;" in printed
    assert "oneof pay {" in printed and "optional string note = 7;" in printed


def proto_change(old: str, new: str) -> list[str]:
    return check_compatibility("BACKWARD", ProtobufSchema(PROTO.replace(old, new)),
                               [ProtobufSchema(PROTO)])


def test_protobuf_rules() -> None:
    assert proto_change("int64 id = 1;", "int32 id = 1;") == []  # same wire group
    assert proto_change("  optional string note = 7;\n", "") == []  # field removed
    assert "FIELD_SCALAR_KIND_CHANGED" in proto_change("int64 id = 1;", "string id = 1;")[0]
    assert "FIELD_KIND_CHANGED" in proto_change("Status status = 8;",
                                                "Line status = 8;")[0] or \
        "FIELD_NAMED_TYPE_CHANGED" in proto_change("Status status = 8;", "Line status = 8;")[0]
    assert "PACKAGE_CHANGED" in proto_change("package shop.v1;", "package shop.v2;")[0]
    assert proto_change("  message Line { bytes sku = 1; }\n", "") and \
        "MESSAGE_REMOVED" in proto_change("  message Line { bytes sku = 1; }\n", "")[0]
    into_oneof = proto_change("  int64 id = 1;\n  repeated string items = 2;\n",
                              "  oneof key {\n    int64 id = 1;\n    string items = 2;\n  }\n")
    assert any("MULTIPLE_FIELDS_MOVED_TO_ONEOF" in p for p in into_oneof)


def test_protobuf_references_and_errors() -> None:
    dep = 'syntax = "proto3";\npackage common;\nmessage Money { int64 cents = 1; }\n'
    main = ('syntax = "proto3";\nimport "common/money.proto";\n'
            "message Price { common.Money value = 1; }\n")
    parsed = ProtobufSchema(main, (ResolvedReference("common/money.proto", dep, ()),))
    assert list(parsed.descriptor.dependency) == ["common/money.proto"]
    with pytest.raises(InvalidSchema, match=r"common/money\.proto"):
        ProtobufSchema(main)
    with pytest.raises(InvalidSchema):
        ProtobufSchema("message {")
    # a descriptor that imports a file no reference names is refused too
    fdp = descriptor_pb2.FileDescriptorProto(name="x.proto", syntax="proto3",
                                             dependency=["missing.proto"])
    fdp.message_type.add(name="X")
    import base64
    with pytest.raises(InvalidSchema, match=r"missing\.proto"):
        ProtobufSchema(base64.b64encode(fdp.SerializeToString()).decode())
    assert to_proto_text(fdp).startswith('syntax = "proto3";')
