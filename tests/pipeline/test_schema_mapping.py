"""Registered schemas mapped to the lake's column types (pipeline/schema_mapping.py): Avro,
JSON Schema and Protobuf, by the conventions its docstring lists. Pure: no Spark."""

from __future__ import annotations

import datetime as dt
import io
import json
from decimal import Decimal

import pytest
from fastavro import parse_schema, schemaless_reader, schemaless_writer

from odradek.pipeline.jsontypes import (
    BOOLEAN,
    DATE,
    DOUBLE,
    FLOAT,
    INT,
    LIST,
    LONG,
    MAP,
    STRING,
    STRUCT,
    TIMESTAMP,
    JType,
    decimal,
    map_of,
    spark_ddl,
    to_arrow,
)
from odradek.pipeline.registry_values import FramedDecoder
from odradek.pipeline.schema_mapping import (
    UnsupportedSchema,
    avro_names,
    avro_type,
    declared_type,
    has_complex_union,
    json_schema_type,
    merge_declared,
    protobuf_type,
    tag_unions,
)


def s(*fields: tuple[str, JType]) -> JType:
    return JType(STRUCT, tuple(fields))


def t(kind: str) -> JType:
    return JType(kind)


def lst(element: JType) -> JType:
    return JType(LIST, element=element)


ORDER = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "placed_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "total", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9,
                               "scale": 2}},
    {"name": "qty", "type": "int"}, {"name": "weight", "type": "float"},
    {"name": "paid", "type": "boolean"},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
        {"name": "city", "type": "string"}, {"name": "zip", "type": ["string", "null"]}]}},
    {"name": "billing", "type": ["null", "Address"], "default": None},
    {"name": "lines", "type": {"type": "array", "items": {
        "type": "record", "name": "Line", "fields": [
            {"name": "sku", "type": "string"}, {"name": "count", "type": "long"}]}}},
    {"name": "attrs", "type": {"type": "map", "values": "string"}},
    {"name": "code", "type": ["null", "string", "long", "Address"], "default": None},
    {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 4}},
]}


def test_avro_record_maps_nested_with_logical_types_enums_maps_and_unions() -> None:
    address = s(("city", t(STRING)), ("zip", t(STRING)))
    assert avro_type(ORDER) == s(
        ("id", t(STRING)), ("placed", t(TIMESTAMP)), ("placed_us", t(TIMESTAMP)),
        ("day", t(DATE)), ("total", decimal(9, 2)), ("qty", t(INT)), ("weight", t(FLOAT)),
        ("paid", t(BOOLEAN)), ("note", t(STRING)), ("status", t(STRING)),
        ("address", address), ("billing", address),  # a named type used again by name
        ("lines", lst(s(("sku", t(STRING)), ("count", t(LONG))))),
        ("attrs", map_of(t(STRING))),
        ("code", s(("string", t(STRING)), ("long", t(LONG)), ("Address", address))),
        ("hash", t(STRING)))


def test_avro_types_named_in_a_reference_are_found() -> None:
    named: dict[str, object] = {}
    avro_type({"type": "record", "name": "Money", "namespace": "fin", "fields": [
        {"name": "cents", "type": "long"}]}, named)
    assert avro_type({"type": "record", "name": "Pay", "namespace": "fin", "fields": [
        {"name": "amount", "type": "Money"}, {"name": "fee", "type": "fin.Money"}]},
        named) == s(("amount", s(("cents", t(LONG)))), ("fee", s(("cents", t(LONG)))))


def test_a_recursive_or_unknown_avro_type_has_no_column_form() -> None:
    with pytest.raises(UnsupportedSchema, match="recursive"):
        avro_type({"type": "record", "name": "Node", "fields": [
            {"name": "next", "type": ["null", "Node"]}]})
    with pytest.raises(UnsupportedSchema, match="unknown"):
        avro_type({"type": "record", "name": "R", "fields": [{"name": "a", "type": "Nope"}]})


def test_union_values_are_tagged_with_their_branch_as_the_struct_expects() -> None:
    parsed = parse_schema(ORDER)
    assert has_complex_union(ORDER)
    assert not has_complex_union({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": ["null", "long"]}]})
    record = {"id": "3b241101-e2bb-4255-8caf-4136c566a962", "placed": 1, "placed_us": 2,
              "day": 3, "total": b"\x01", "qty": 1, "weight": 1.5, "paid": True,
              "note": None, "status": "NEW", "address": {"city": "Oslo", "zip": None},
              "billing": None, "lines": [], "attrs": {}, "code": 7, "hash": b"abcd"}
    buf = io.BytesIO()
    schemaless_writer(buf, parsed, record)
    for code, tagged in ((7, {"long": 7}), ("x", {"string": "x"}), (None, None),
                         ({"city": "Rome", "zip": "1"}, {"Address": {"city": "Rome",
                                                                      "zip": "1"}})):
        buf = io.BytesIO()
        schemaless_writer(buf, parsed, {**record, "code": code})
        buf.seek(0)
        read = tag_unions(schemaless_reader(buf, parsed, None, return_record_name=True),
                          ORDER, avro_names([ORDER]))
        assert read["code"] == tagged
        assert read["note"] is None and read["address"] == {"city": "Oslo", "zip": None}


def test_json_schema_maps_objects_refs_formats_and_nullable_types() -> None:
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
              "definitions": {"place": {"type": "object", "properties": {
                  "site": {"type": "string"}, "floor": {"type": "integer"}}}},
              "properties": {
                  "id": {"type": "integer"}, "value": {"type": ["number", "null"]},
                  "at": {"type": "string", "format": "date-time"},
                  "ok": {"type": "boolean"}, "kind": {"enum": ["a", "b"]},
                  "place": {"$ref": "#/definitions/place"},
                  "tags": {"type": "array", "items": {"type": "string"}},
                  "extra": {"type": "object", "additionalProperties": {"type": "string"}},
                  "maybe": {"oneOf": [{"type": "null"}, {"type": "integer"}]},
                  "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}
    assert json_schema_type(schema) == s(
        ("id", t(LONG)), ("value", t(DOUBLE)), ("at", t(TIMESTAMP)), ("ok", t(BOOLEAN)),
        ("kind", t(STRING)), ("place", s(("site", t(STRING)), ("floor", t(LONG)))),
        ("tags", lst(t(STRING))), ("extra", map_of(t(STRING))), ("maybe", t(LONG)),
        ("either", t(STRING)))
    assert json_schema_type({"$defs": {"n": {"type": "object", "properties": {
        "a": {"type": "integer"}}}}, "$ref": "#/$defs/n"}) == s(("a", t(LONG)))
    with pytest.raises(UnsupportedSchema, match="recursive"):
        json_schema_type({"definitions": {"n": {"type": "object", "properties": {
            "next": {"$ref": "#/definitions/n"}}}}, "$ref": "#/definitions/n"})


def test_protobuf_message_maps_from_its_descriptor() -> None:
    from google.protobuf import descriptor_pb2, descriptor_pool, timestamp_pb2

    fdp = descriptor_pb2.FileDescriptorProto(name="m.proto", package="iot", syntax="proto3",
                                             dependency=["google/protobuf/timestamp.proto"])
    place = fdp.message_type.add(name="Place")
    place.field.add(name="site", number=1, type=9, label=1)
    msg = fdp.message_type.add(name="Reading")
    F = descriptor_pb2.FieldDescriptorProto
    for n, (name, kind, label, type_name) in enumerate([
            ("device", F.TYPE_STRING, F.LABEL_OPTIONAL, ""),
            ("count", F.TYPE_INT64, F.LABEL_OPTIONAL, ""),
            ("small", F.TYPE_INT32, F.LABEL_OPTIONAL, ""),
            ("ratio", F.TYPE_FLOAT, F.LABEL_OPTIONAL, ""),
            ("value", F.TYPE_DOUBLE, F.LABEL_OPTIONAL, ""),
            ("on", F.TYPE_BOOL, F.LABEL_OPTIONAL, ""),
            ("raw", F.TYPE_BYTES, F.LABEL_OPTIONAL, ""),
            ("place", F.TYPE_MESSAGE, F.LABEL_OPTIONAL, ".iot.Place"),
            ("places", F.TYPE_MESSAGE, F.LABEL_REPEATED, ".iot.Place"),
            ("tags", F.TYPE_STRING, F.LABEL_REPEATED, ""),
            ("at", F.TYPE_MESSAGE, F.LABEL_OPTIONAL, ".google.protobuf.Timestamp"),
            ("attrs", F.TYPE_MESSAGE, F.LABEL_REPEATED, ".iot.Reading.AttrsEntry")], 1):
        field = msg.field.add(name=name, number=n, type=kind, label=label)
        if type_name:
            field.type_name = type_name
    entry = msg.nested_type.add(name="AttrsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    ts = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(ts)
    pool.Add(ts)
    pool.Add(fdp)
    place_t = s(("site", t(STRING)))
    assert protobuf_type(pool.FindMessageTypeByName("iot.Reading")) == s(
        ("device", t(STRING)), ("count", t(LONG)), ("small", t(INT)), ("ratio", t(FLOAT)),
        ("value", t(DOUBLE)), ("on", t(BOOLEAN)), ("raw", t(STRING)), ("place", place_t),
        ("places", lst(place_t)), ("tags", lst(t(STRING))), ("at", t(TIMESTAMP)),
        ("attrs", map_of(t(STRING))))


def test_versions_in_one_batch_merge_into_one_type() -> None:
    v1 = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"},
        {"name": "p", "type": {"type": "record", "name": "P", "fields": [
            {"name": "x", "type": "long"}]}}]}
    v2 = {**v1, "fields": [{"name": "a", "type": "long"},
                           {"name": "p", "type": {"type": "record", "name": "P", "fields": [
                               {"name": "x", "type": "long"}, {"name": "y", "type": "string"}
                           ]}}, {"name": "b", "type": ["null", "double"], "default": None}]}
    types = [declared_type("AVRO", json.dumps(v)) for v in (v1, v2)]
    assert merge_declared(types) == s(
        ("a", t(LONG)), ("p", s(("x", t(LONG)), ("y", t(STRING)))), ("b", t(DOUBLE)))
    assert merge_declared([]) is None


METER = {"type": "record", "name": "Meter", "fields": [
    {"name": "counts", "type": {"type": "map", "values": "long"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10,
                               "scale": 2}},
    {"name": "fee", "type": {"type": "fixed", "name": "Fee", "size": 6,
                             "logicalType": "decimal", "precision": 12, "scale": 3}}]}


def test_avro_maps_dates_and_decimals_get_their_own_columns_and_values() -> None:
    assert avro_type(METER) == s(("counts", map_of(t(LONG))), ("day", t(DATE)),
                                 ("price", decimal(10, 2)), ("fee", decimal(12, 3)))
    parsed = parse_schema(METER)
    buf = io.BytesIO()
    record = {"counts": {"a": 1, "b": -2**40}, "day": dt.date(2026, 11, 27),
              "price": Decimal("-12345678.91"), "fee": Decimal("123456789.125")}
    schemaless_writer(buf, parsed, record)
    # the unscaled value on the wire: -1234567891 as two's-complement big-endian bytes
    assert (-1234567891).to_bytes(4, "big", signed=True) in buf.getvalue()
    buf.seek(0)
    read = schemaless_reader(buf, parsed, None)
    assert read == record
    assert type(read["day"]) is dt.date and isinstance(read["price"], Decimal)
    # the registry path's JSON keeps every digit (a double would round 123456789.125…)
    decoder = FramedDecoder("http://127.0.0.1:1")
    decoder._readers[7] = decoder._avro(7, {"schema": json.dumps(METER)})
    framed = b"\0" + (7).to_bytes(4, "big") + buf.getvalue()
    text, error = decoder.decode(framed)
    assert error is None and text is not None
    assert json.loads(text) == {"counts": {"a": 1, "b": -2**40}, "day": "2026-11-27",
                                "price": "-12345678.91", "fee": "123456789.125"}
    assert decoder.declared_type([7]) == avro_type(METER)
    # …and the columns the lake makes of them
    assert spark_ddl(avro_type(METER)) == (
        "struct<`counts`:map<string,bigint>,`day`:date,`price`:decimal(10,2),"
        "`fee`:decimal(12,3)>")
    arrow = to_arrow(avro_type(METER))
    assert str(arrow.field("counts").type) == "map<string, int64>"
    assert str(arrow.field("day").type) == "date32[day]"
    assert str(arrow.field("price").type) == "decimal128(10, 2)"


def test_a_decimal_wider_than_iceberg_or_without_precision() -> None:
    wide = {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2}
    assert avro_type(wide) == t(DOUBLE)
    with pytest.raises(UnsupportedSchema, match="decimal"):
        avro_type({"type": "bytes", "logicalType": "decimal"})


def test_json_schema_dates_and_maps() -> None:
    assert json_schema_type({"type": "object", "properties": {
        "day": {"type": "string", "format": "date"},
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        "free": {"type": "object"},
        "none": {"type": "object", "additionalProperties": False}}}) == s(
        ("day", t(DATE)), ("counts", map_of(t(LONG))), ("free", map_of(t(STRING))),
        ("none", t(STRING)))


def test_protobuf_map_values_keep_their_type() -> None:
    from google.protobuf import descriptor_pb2, descriptor_pool

    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="c.proto", package="c", syntax="proto3")
    msg = fdp.message_type.add(name="Counts")
    msg.field.add(name="by_site", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                  type_name=".c.Counts.BySiteEntry")
    entry = msg.nested_type.add(name="BySiteEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    assert protobuf_type(pool.FindMessageTypeByName("c.Counts")) == s(
        ("by_site", map_of(t(LONG))))


def test_versions_widen_a_decimals_precision_and_a_maps_values() -> None:
    v1 = s(("p", decimal(10, 2)), ("m", map_of(t(INT))))
    v2 = s(("p", decimal(12, 2)), ("m", map_of(t(LONG))))
    assert merge_declared([v1, v2]) == s(("p", decimal(12, 2)), ("m", map_of(t(LONG))))
    assert JType(MAP, element=t(LONG)) == map_of(t(LONG))
