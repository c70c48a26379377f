"""Avro bodies straight into Arrow columns (pipeline/avro_arrow.py): the values today's
path lands (fastavro → FramedDecoder's JSON → Spark's cast; proven against Spark itself
in tests/pipeline/spark/test_avro_arrow_spark.py), the current decoder's reasons for bad
bodies, and AvroUnsupported (one line saying why) for what it does not reproduce."""

from __future__ import annotations

import datetime as dt
import io
import json
import re
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.registry_lake import SCHEMA as BENCH
from odradek.pipeline.avro_arrow import AvroUnsupported, decode_bodies, strip_framing
from odradek.pipeline.jsontypes import (
    DATE,
    DOUBLE,
    INT,
    LIST,
    LONG,
    STRING,
    STRUCT,
    TIMESTAMP,
    JType,
    decimal,
    json_error,
    to_arrow,
)
from odradek.pipeline.registry_values import FramedDecoder
from odradek.pipeline.schema_mapping import avro_type

UTC = dt.UTC


def body(schema: Any, record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    return bytes(out) + bytes([z])


def record(*fields: tuple[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": "R", "namespace": "t",
            "fields": [{"name": n, "type": t} for n, t in fields]}


def decode(schema: Any, bodies: list[bytes], target: JType | None = None,
           schema_id: int | None = 3) -> tuple[list[dict[str, Any]], dict[int, str]]:
    table, errors = decode_bodies(bodies, schema, target or avro_type(schema),
                                  schema_id=schema_id)
    assert table.schema == pa.schema([pa.field(n, to_arrow(t)) for n, t in
                                      (target or avro_type(schema)).fields])
    return table.to_pylist(), errors


def framed_reason(schema: Any, raw: bytes, schema_id: int = 3) -> str | None:
    """What FramedDecoder says of this body (its reader, without a registry)."""
    reader = FramedDecoder("http://unused")._avro(schema_id, {"schema": json.dumps(schema)})
    try:
        reader(raw)
    except Exception as e:
        return f"not a record of schema {schema_id}: {type(e).__name__}: {e}"
    return None


# ---- what lands ----------------------------------------------------------------------

ALL = record(
    ("s", "string"), ("l", "long"), ("i", "int"), ("b", "boolean"), ("f", "float"),
    ("d", "double"), ("nd", ["null", "double"]), ("dn", ["double", "null"]),
    ("e", {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}),
    ("ne", ["null", "E"]),
    ("by", "bytes"), ("fx", {"type": "fixed", "name": "F", "size": 3}),
    ("day", {"type": "int", "logicalType": "date"}),
    ("ms", {"type": "long", "logicalType": "timestamp-millis"}),
    ("us", {"type": "long", "logicalType": "timestamp-micros"}),
    ("lms", {"type": "long", "logicalType": "local-timestamp-millis"}),
    ("lus", {"type": "long", "logicalType": "local-timestamp-micros"}),
    ("price", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}),
    ("tiny", {"type": "fixed", "name": "D", "size": 9, "logicalType": "decimal",
              "precision": 20, "scale": 8}),
    ("id", {"type": "string", "logicalType": "uuid"}),
    ("place", {"type": "record", "name": "Place", "fields": [
        {"name": "site", "type": "string"}, {"name": "floor", "type": ["null", "int"]}]}),
    ("maybe", ["null", "Place"]),
    ("tags", {"type": "array", "items": "string"}),
    ("ns", {"type": "array", "items": ["null", "long"]}),
    ("flags", {"type": "array", "items": {"type": "record", "name": "Flag", "fields": [
        {"name": "on", "type": "boolean"}, {"name": "e", "type": ["E", "null"]}]}}),
    ("grid", {"type": "array", "items": {"type": "array", "items": "double"}}),
    ("attrs", {"type": "map", "values": ["null", "long"]}),
    ("tm", {"type": "int", "logicalType": "time-millis"}),
    ("tu", ["null", {"type": "long", "logicalType": "time-micros"}]),
    ("deep", ["null", {"type": "map", "values": {"type": "array", "items": "Place"}}]),
)

EDGE: dict[str, Any] = {
    "s": "ünï 😀 \x00 \"q\" \\", "l": -(2 ** 63), "i": 2 ** 31 - 1, "b": False, "f": -0.0,
    "d": 5e-324, "nd": None, "dn": -0.0, "e": "C", "ne": None, "by": b"", "fx": b"\xff\x00a",
    "day": dt.date(1, 1, 1), "ms": dt.datetime(1, 1, 1, tzinfo=UTC),
    "us": dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    "lms": dt.datetime(1969, 12, 31, 23, 59, 59, 999000),
    "lus": dt.datetime(2024, 2, 29, 12, 0, 0, 1), "price": Decimal("-99999999.99"),
    "tiny": Decimal("0.00000001"), "id": "00000000-0000-0000-0000-000000000000",
    "place": {"site": "", "floor": None}, "maybe": None, "tags": [], "ns": [None, 0],
    "flags": [], "grid": [[], [1e308, -1e-308]], "attrs": {}, "deep": None,
    "tm": dt.time(0, 0), "tu": None}
PLAIN: dict[str, Any] = {
    "s": "dev-1", "l": 1_700_000_000_000, "i": -7, "b": True, "f": 0.1, "d": 1 / 3,
    "nd": 2.5, "dn": 1e16, "e": "A", "ne": "B", "by": b"\x00\xfe", "fx": b"abc",
    "day": dt.date(2024, 5, 17), "ms": dt.datetime(2024, 5, 17, 1, 2, 3, 456000, tzinfo=UTC),
    "us": dt.datetime(1950, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
    "lms": dt.datetime(2024, 5, 17, 1, 2, 3, 456000), "lus": dt.datetime(9999, 1, 1),
    "price": Decimal("123.45"), "tiny": Decimal("-123456789012.34567891"),
    "id": "0f8fad5b-d9cb-469f-a165-70867728950e",
    "place": {"site": "oslo", "floor": 3}, "maybe": {"site": "rome", "floor": None},
    "tags": ["a", "b"], "ns": [1, None, -(2 ** 40)],
    "flags": [{"on": True, "e": None}, {"on": False, "e": "B"}], "grid": [[0.5]],
    "attrs": {"b": 1, "a": None, "B": -2, "é": 3, "": 0},
    "deep": {"z": [], "y": [{"site": "lima", "floor": 1}]},
    "tm": dt.time(23, 59, 59, 999000), "tu": dt.time(1, 2, 3, 4)}


def expected(value: dict[str, Any]) -> dict[str, Any]:
    """What today's path lands for ALL's records (see the Spark test for the proof)."""
    import base64

    out = dict(value)
    out["f"] = float(value["f"]) + 0.0  # a float32 column; -0.0 lands as 0.0
    out["dn"] = None if value["dn"] is None else value["dn"] + 0.0
    out["by"] = base64.b64encode(value["by"]).decode()
    out["fx"] = base64.b64encode(value["fx"]).decode()
    out["id"] = str(value["id"])  # fastavro gives a UUID, its JSON is str()
    for name in ("tm", "tu"):  # a time lands as its text
        out[name] = None if value[name] is None else value[name].isoformat()
    for name in ("lms", "lus"):
        out[name] = value[name].replace(tzinfo=UTC)  # naive: read as UTC (the session's)
    for name in ("attrs", "deep"):  # a map's keys in order, as a variant object keeps them
        out[name] = None if value[name] is None else sorted(value[name].items())
    return out


def test_every_type_lands_as_today() -> None:
    rows, errors = decode(ALL, [body(ALL, PLAIN), body(ALL, EDGE)])
    assert errors == {}
    for got, want in zip(rows, (PLAIN, EDGE), strict=True):
        want = expected(want)
        got["f"] = float(pa.array([got["f"]], pa.float32())[0].as_py())
        want["f"] = float(pa.array([want["f"]], pa.float32())[0].as_py())
        assert got == want


def test_bench_record_round_trips_a_large_batch() -> None:
    from bench.registry_lake import events

    sample = events(20_000)
    table, errors = decode_bodies(pa.array([body(BENCH, e) for e in sample], pa.binary()),
                                  BENCH, avro_type(BENCH), schema_id=1)
    assert errors == {}
    assert table.to_pylist() == sample


bench_records = st.fixed_dictionaries({
    "device_id": st.text(), "ts": st.integers(-(2 ** 63), 2 ** 63 - 1),
    "place": st.fixed_dictionaries({"site": st.text(),
                                    "floor": st.integers(-(2 ** 31), 2 ** 31 - 1)}),
    "kind": st.sampled_from(["TEMP", "HUM"]),
    "value": st.none() | st.floats(allow_nan=False, allow_infinity=False),
    "tags": st.lists(st.text(max_size=5), max_size=4)})


@settings(max_examples=60, deadline=None)
@given(st.lists(bench_records, max_size=30))
def test_random_bench_records_round_trip(records: list[dict[str, Any]]) -> None:
    rows, errors = decode(BENCH, [body(BENCH, r) for r in records])
    assert errors == {}
    for r in records:  # -0.0 lands as 0.0, as Spark reads the JSON -0.0
        r["value"] = None if r["value"] is None else r["value"] + 0.0
    assert rows == records


def test_wider_target_and_columns_the_writer_lacks() -> None:
    schema = record(("n", "int"), ("f", "float"), ("l", "long"),
                    ("p", {"type": "bytes", "logicalType": "decimal", "precision": 5,
                           "scale": 2}),
                    ("r", {"type": "record", "name": "In", "fields": [
                        {"name": "x", "type": "int"}]}))
    target = JType(STRUCT, (
        ("n", JType(LONG)), ("f", JType(DOUBLE)), ("l", JType(DOUBLE)),
        ("p", decimal(12, 2)), ("gone", JType(STRING)),
        ("r", JType(STRUCT, (("x", JType(LONG)), ("y", JType(LIST, element=JType(DATE)))))),
        ("later", JType(TIMESTAMP))))
    rows, errors = decode(schema, [
        body(schema, {"n": -5, "f": 0.1, "l": 2 ** 53 + 1, "p": Decimal("-1.50"),
                      "r": {"x": 2 ** 31 - 1}})], target)
    assert errors == {}
    assert rows == [{"n": -5, "f": 0.10000000149011612, "l": 9007199254740992.0,
                     "p": Decimal("-1.50"), "gone": None, "r": {"x": 2 ** 31 - 1, "y": None},
                     "later": None}]


def test_an_int_beyond_32_bits_lands_whole_in_a_long_column() -> None:
    """fastavro reads an int field's varint whole; its JSON number fits the long column."""
    schema = record(("n", "int"))
    raw = varint(2 ** 40)
    rows, errors = decode(schema, [raw], JType(STRUCT, (("n", JType(LONG)),)))
    assert rows == [{"n": 2 ** 40}] and errors == {}
    with pytest.raises(AvroUnsupported, match="int beyond 32 bits"):
        decode(schema, [raw], JType(STRUCT, (("n", JType(INT)),)))


def test_bodies_as_a_sliced_or_chunked_arrow_column() -> None:
    """As the lane has them: the Kafka values with their framing cut off, in chunks."""
    records = [{"device_id": f"d{i}", "ts": i, "place": {"site": "s", "floor": i},
                "kind": "TEMP", "value": None, "tags": []} for i in range(7)]
    framed = pa.array([b"\x00\x00\x00\x00\x01" + body(BENCH, r) for r in records],
                      pa.binary())
    bodies = strip_framing(framed).slice(2)
    chunked = pa.chunked_array([bodies.slice(0, 2), bodies.slice(2)])
    for column in (bodies, chunked):
        table, errors = decode_bodies(column, BENCH, avro_type(BENCH))
        assert errors == {} and table.to_pylist() == records[2:]


def test_no_bodies_give_an_empty_table() -> None:
    rows, errors = decode(BENCH, [])
    assert rows == [] and errors == {}


def test_named_types_from_references() -> None:
    place = {"type": "record", "name": "Place", "namespace": "geo", "fields": [
        {"name": "site", "type": "string"}]}
    schema = record(("at", "geo.Place"), ("again", ["null", "geo.Place"]))
    target = avro_type(schema, {"geo.Place": place, "Place": place})
    raw = b"".join([varint(2), b"ab", varint(1), varint(1), b"c"])
    table, errors = decode_bodies([raw], schema, target, references=[place])
    assert errors == {}
    assert table.to_pylist() == [{"at": {"site": "ab"}, "again": {"site": "c"}}]


# ---- bad bodies ----------------------------------------------------------------------

def test_corrupt_bodies_get_the_current_decoders_reasons_and_the_rest_decodes() -> None:
    good = [body(BENCH, e) for e in
            [{"device_id": f"d{i}", "ts": i, "place": {"site": "x", "floor": i},
              "kind": "HUM", "value": i / 3, "tags": ["t"] * i} for i in range(6)]]
    bad = {
        1: good[1] + b"\x00",  # trailing bytes
        2: good[2][:5],  # cut short
        4: b"\x7e" + good[4][1:],  # a string length past the end
    }
    bodies = [bad.get(i, b) for i, b in enumerate(good)]
    rows, errors = decode(BENCH, bodies, schema_id=9)
    assert set(errors) == set(bad)
    for i, raw in bad.items():
        assert errors[i] == framed_reason(BENCH, raw, 9)
    assert errors[1] == "not a record of schema 9: ValueError: 1 bytes left over"
    assert [r["device_id"] for r in rows] == ["d0", "d3", "d5"]


def test_without_an_id_the_reasons_are_the_plain_avro_decoders() -> None:
    from odradek.pipeline.avro_values import AvroDecoder

    raw = body(BENCH, {"device_id": "d", "ts": 1, "place": {"site": "x", "floor": 1},
                       "kind": "HUM", "value": None, "tags": []})
    bad = [raw + b"\x01\x02", raw[:3]]
    _, errors = decode(BENCH, [raw, *bad], schema_id=None)
    plain = AvroDecoder(BENCH, confluent=False)
    assert errors == {1: plain.decode(bad[0])[1], 2: plain.decode(bad[1])[1]}


@pytest.mark.parametrize("label, schema, raw", [
    # union index 2 of a two-branch union: the vectorised reader would read it as a value
    ("union index", record(("v", ["null", "long"])), varint(2) + varint(5)),
    ("union index in a map in an array", record(("a", {"type": "array", "items": {
        "type": "map", "values": ["null", "long"]}})),
     varint(1) + varint(2) + varint(1) + b"a" + varint(0) + varint(1) + b"b"
     + varint(-3) + varint(0) + varint(0)),
    ("enum index", record(("e", {"type": "enum", "name": "E", "symbols": ["A"]})),
     varint(3)),
    ("not UTF-8", record(("s", "string")), varint(2) + b"\xff\xfe"),
    ("date past 9999", record(("d", {"type": "int", "logicalType": "date"})),
     varint(3_000_000)),
    ("timestamp before year 1", record(("t", {"type": "long",
                                              "logicalType": "timestamp-micros"})),
     varint(-(2 ** 62))),
    ("not a uuid", record(("u", {"type": "string", "logicalType": "uuid"})),
     varint(3) + b"xyz"),
    ("time past the day", record(("t", {"type": "int", "logicalType": "time-millis"})),
     varint(86_400_000)),
])
def test_bodies_fastavro_refuses_are_reported_with_its_reason(label: str, schema: Any,
                                                              raw: bytes) -> None:
    rows, errors = decode(schema, [raw])
    assert rows == []
    assert errors == {0: framed_reason(schema, raw)}, label


def test_nan_is_quarantined_as_spark_refuses_its_json() -> None:
    """json.dumps writes NaN, try_parse_json refuses it: the lake quarantines the record
    with json_error of its framed value."""
    schema = record(("x", "double"), ("y", ["null", "float"]))
    bodies = [body(schema, {"x": 1.0, "y": None}), body(schema, {"x": float("nan"), "y": None}),
              body(schema, {"x": 2.0, "y": float("-inf")})]
    rows, errors = decode(schema, bodies, schema_id=12)
    assert rows == [{"x": 1.0, "y": None}]
    assert errors == {i: json_error(b"\x00" + (12).to_bytes(4, "big") + bodies[i])
                      for i in (1, 2)}
    with pytest.raises(AvroUnsupported, match="NaN"):
        decode(schema, bodies, schema_id=None)


@pytest.mark.parametrize("label, schema, raw", [
    # fastavro takes these, but they land as values we do not reproduce exactly
    ("boolean byte 2", record(("b", "boolean")), b"\x02"),
    ("upper-case uuid", record(("u", {"type": "string", "logicalType": "uuid"})),
     varint(36) + b"0F8FAD5B-D9CB-469F-A165-70867728950E"),
    ("decimal wider than its precision", record(
        ("p", {"type": "bytes", "logicalType": "decimal", "precision": 3, "scale": 0})),
     varint(2) + (12345).to_bytes(2, "big")),
    ("decimal of scale 2 wider than its precision", record(
        ("p", {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2})),
     varint(2) + (-12345).to_bytes(2, "big", signed=True)),
    ("array in two blocks", record(("a", {"type": "array", "items": "long"})),
     varint(1) + varint(5) + varint(1) + varint(6) + varint(0)),
    ("padded varint", record(("n", "long")), b"\x82\x00"),
    ("negative time", record(("t", {"type": "long", "logicalType": "time-micros"})),
     varint(-1)),
    ("repeated map key", record(("m", {"type": "map", "values": "int"})),
     varint(2) + varint(1) + b"k" + varint(1) + varint(1) + b"k" + varint(2) + varint(0)),
    ("map key past U+E000", record(("m", {"type": "map", "values": "int"})),
     varint(1) + varint(3) + "\ue000".encode() + varint(1) + varint(0)),
    ("boolean byte 2 in an array of records", record(("a", {"type": "array", "items": {
        "type": "record", "name": "B", "fields": [{"name": "s", "type": "string"},
                                                  {"name": "b", "type": "boolean"}]}})),
     varint(2) + varint(1) + b"x" + b"\x01" + varint(0) + b"\x02" + varint(0)),
])
def test_values_fastavro_takes_but_not_reproduced_refuse_the_batch(label: str, schema: Any,
                                                                   raw: bytes) -> None:
    assert framed_reason(schema, raw) is None, label
    with pytest.raises(AvroUnsupported):
        decode(schema, [raw])


# ---- refused schemas -----------------------------------------------------------------

@pytest.mark.parametrize("schema, target, why", [
    (record(("m", {"type": "map", "values": "long"})),
     JType(STRUCT, (("m", JType(LIST, element=JType(LONG))),)), "list"),
    (record(("u", ["null", "string", "long"])), None, "union"),
    (record(("t", {"type": "fixed", "name": "T", "size": 12, "logicalType": "duration"})),
     None, "duration"),
    (record(("t", {"type": "long", "logicalType": "timestamp-nanos"})), None,
     "timestamp-nanos"),
    (record(("p", {"type": "bytes", "logicalType": "decimal", "precision": 40,
                   "scale": 2})), None, "decimal"),
    ({"type": "record", "name": "Node", "fields": [
        {"name": "next", "type": ["null", "Node"]}]},
     JType(STRUCT, (("next", JType(STRING)),)), "recursive"),
    (record(("n", "long")), JType(STRUCT, (("n", JType(STRING)),)), "string"),
    (record(("r", {"type": "record", "name": "In", "fields": [{"name": "x", "type": "int"}]})),
     JType(STRUCT, (("r", JType(STRING)),)), "string"),
    (record(("p", {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2})),
     JType(STRUCT, (("p", decimal(9, 3)),)), "decimal"),
    (record(("l", "long")), JType(STRUCT, (("l", JType(INT)),)), "int"),
    ("string", JType(STRUCT, ()), "not a record"),
])
def test_schemas_it_cannot_reproduce_are_refused_in_one_line(
        schema: Any, target: JType | None, why: str) -> None:
    with pytest.raises(AvroUnsupported, match=why) as refused:
        decode_bodies([], schema, target or avro_type(schema))
    assert "\n" not in str(refused.value)


# ---- corruption against fastavro ------------------------------------------------------

def _has_nan(value: Any) -> bool:
    if isinstance(value, float):
        return value != value or value in (float("inf"), float("-inf"))
    if isinstance(value, dict):
        return any(_has_nan(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_nan(v) for v in value)
    return False


def _corrupt(rng: Any, raw: bytes) -> bytes:
    kind = rng.randrange(4)
    at = rng.randrange(len(raw) + 1)
    if kind == 0 and raw:  # flip a byte
        at = min(at, len(raw) - 1)
        return raw[:at] + bytes([raw[at] ^ (1 << rng.randrange(8))]) + raw[at + 1:]
    if kind == 1:  # cut short
        return raw[:at]
    if kind == 2:  # bytes inserted
        return raw[:at] + rng.randbytes(rng.randrange(1, 4)) + raw[at:]
    return raw + rng.randbytes(rng.randrange(1, 3))  # bytes after the end


@pytest.mark.parametrize("schema, make, render", [
    (BENCH, lambda i: {"device_id": f"dev-{i}", "ts": 1_700_000_000_000 + i,
                       "place": {"site": "oslo", "floor": i % 7},
                       "kind": "TEMP" if i % 2 else "HUM",
                       "value": None if i % 5 == 0 else i / 7, "tags": ["a", "b"][: i % 3]},
     lambda r: r),
    (ALL, lambda i: PLAIN if i % 2 else EDGE, expected),
])
def test_corrupted_batches_land_what_fastavro_says(schema: Any, make: Any,
                                                   render: Any) -> None:
    """Random corruption (flips, cuts, insertions) of a few bodies of a batch: every body
    fastavro refuses is reported with its reason, every other lands as fastavro reads it
    (or the batch is refused whole) — never a value fastavro would not give."""
    import random

    reader = fastavro.parse_schema(schema)
    rng = random.Random(1616)
    refused = 0
    for _ in range(150):
        bodies = [body(schema, make(i)) for i in range(12)]
        for i in rng.sample(range(12), rng.randrange(1, 4)):
            bodies[i] = _corrupt(rng, bodies[i])
        want_rows, want_errors = [], {}
        for i, raw in enumerate(bodies):
            why = framed_reason(schema, raw)
            if why is not None:
                want_errors[i] = why
                continue
            value = fastavro.schemaless_reader(io.BytesIO(raw), reader, None)
            if _has_nan(value):
                want_errors[i] = json_error(b"\x00" + (3).to_bytes(4, "big") + raw)
            else:
                want_rows.append(render(value))
        try:
            rows, errors = decode(schema, bodies)
        except AvroUnsupported:
            refused += 1
            continue
        # some of fastavro's messages name the stream object (an address): not comparable
        assert {i: re.sub(" at 0x[0-9a-f]+", "", e) for i, e in errors.items()} == \
            {i: re.sub(" at 0x[0-9a-f]+", "", e) for i, e in want_errors.items()}
        for got, want in zip(rows, want_rows, strict=True):
            if "f" in want:  # a float32 column holds the float32 value
                want = {**want, "f": pa.array([want["f"]], pa.float32())[0].as_py()}
                got = {**got, "f": pa.array([got["f"]], pa.float32())[0].as_py()}
            assert got == want
    assert refused < 40  # most corrupt batches still decode
