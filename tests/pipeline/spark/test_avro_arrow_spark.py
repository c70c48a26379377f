"""avro_arrow against today's path itself: the same bodies through FramedDecoder's JSON,
Spark's try_parse_json and the lake's load expressions (a registry batch's plan: the
table's columns, the registered schema's types) land row for row what decode_bodies
returns; every accepted type, edge values, random doubles and decimals, a wider table."""

from __future__ import annotations

import datetime as dt
import json
import random
import struct
import uuid
from decimal import Decimal
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from odradek.pipeline.avro_arrow import decode_bodies
from odradek.pipeline.jsontypes import DOUBLE, LONG, STRING, STRUCT, JType, decimal
from odradek.pipeline.registry_values import FramedDecoder
from odradek.pipeline.schema_mapping import avro_type
from odradek.pipeline.schema_merge import expected_plan, load_expressions, plan_merge
from tests.pipeline.test_avro_arrow import ALL, EDGE, PLAIN, body
from tests.registry.conftest import RegistryProcess

UTC = dt.UTC


def todays_rows(spark: SparkSession, schema: Any, bodies: list[bytes],
                table: JType) -> list[dict[str, Any]]:
    """What the lake writes for these bodies into a table of these columns today."""
    read = FramedDecoder("http://unused")._avro(5, {"schema": json.dumps(schema)})
    docs = [(i, read(b)) for i, b in enumerate(bodies)]
    plan = plan_merge(table, avro_type(schema))
    if plan.table != table:  # the lake would add the writer's new nested fields first;
        plan = expected_plan(table)  # into this table it casts each column as it is
    assert {load.mode for load in plan.loads} <= {"cast", "null"}
    frame = (spark.createDataFrame(docs, "i long, doc string")
             .selectExpr("i", "try_parse_json(doc) AS v")
             .orderBy("i").selectExpr(*load_expressions(plan)))
    return frame.toArrow().to_pylist()


def time_of(micros: int) -> dt.time:
    return (dt.datetime(2000, 1, 1) + dt.timedelta(microseconds=micros)).time()


def random_record(rng: random.Random) -> dict[str, Any]:
    def double() -> float:
        while True:
            d: float = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
            if d == d and abs(d) != float("inf"):
                return d if rng.random() < 0.5 else rng.uniform(-1e6, 1e6)

    def text() -> str:
        return "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0xD7FF),
                                       rng.randrange(0x10000, 0x10FFFF)]))
                       for _ in range(rng.randrange(6)))

    def key() -> str:
        return "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0xD7FF)]))
                       for _ in range(rng.randrange(4)))

    def when(scale: int) -> int:
        return rng.randrange(-62_135_596_800_000_000, 253_402_300_799_999_999) // scale

    epoch = dt.datetime(1970, 1, 1, tzinfo=UTC)
    return {
        "s": text(), "l": rng.randrange(-(2 ** 63), 2 ** 63), "i": rng.randrange(-(2 ** 31),
                                                                              2 ** 31),
        "b": rng.random() < 0.5, "f": struct.unpack("<f", struct.pack("<f", rng.uniform(
            -1e30, 1e30)))[0], "d": double(), "nd": rng.choice([None, double()]),
        "dn": rng.choice([None, double()]), "e": rng.choice("ABC"),
        "ne": rng.choice([None, "A", "C"]), "by": rng.randbytes(rng.randrange(5)),
        "fx": rng.randbytes(3), "day": dt.date.fromordinal(rng.randrange(1, 3_652_059)),
        "ms": epoch + dt.timedelta(microseconds=when(1000) * 1000),
        "us": epoch + dt.timedelta(microseconds=when(1)),
        "lms": (epoch + dt.timedelta(microseconds=when(1000) * 1000)).replace(tzinfo=None),
        "lus": (epoch + dt.timedelta(microseconds=when(1))).replace(tzinfo=None),
        "price": Decimal(rng.randrange(-(10 ** 10) + 1, 10 ** 10)).scaleb(-2),
        "tiny": Decimal(rng.randrange(-(10 ** 20) + 1, 10 ** 20)).scaleb(-8),
        "id": str(uuid.UUID(int=rng.getrandbits(128))),
        "place": {"site": text(), "floor": rng.choice([None, rng.randrange(-99, 99)])},
        "maybe": rng.choice([None, {"site": text(), "floor": None}]),
        "tags": [text() for _ in range(rng.randrange(3))],
        "ns": [rng.choice([None, rng.randrange(-(2 ** 63), 2 ** 63)])
               for _ in range(rng.randrange(3))],
        "flags": [{"on": rng.random() < 0.5, "e": rng.choice([None, "B"])}
                  for _ in range(rng.randrange(3))],
        "grid": [[double() for _ in range(rng.randrange(3))] for _ in range(rng.randrange(3))],
        # keys below U+E000: there UTF-8 and UTF-16 orders agree (avro_arrow._map)
        "attrs": {key(): rng.choice([None, rng.randrange(-9, 9)]) for _ in range(rng.randrange(5))},
        "deep": rng.choice([None, {key(): [{"site": text(), "floor": None}]
                                   for _ in range(rng.randrange(3))}]),
        "tm": time_of(rng.randrange(86_400_000) * 1000),
        "tu": rng.choice([None, time_of(rng.randrange(86_400_000_000)),
                          time_of(rng.randrange(86_400) * 1_000_000)]),
    }


def test_every_type_lands_as_todays_path_lands_it(spark: SparkSession) -> None:
    rng = random.Random(16)
    records = [PLAIN, EDGE, *(random_record(rng) for _ in range(400))]
    bodies = [body(ALL, r) for r in records]
    target = avro_type(ALL)
    fast, errors = decode_bodies(bodies, ALL, target, schema_id=5)
    assert errors == {}
    today = todays_rows(spark, ALL, bodies, target)
    assert fast.num_rows == len(today)
    mine = fast.to_pylist()
    for i, (got, want) in enumerate(zip(mine, today, strict=True)):
        assert got == want, (i, {k: (got[k], want[k]) for k in got if got[k] != want[k]})
        assert repr(got) == repr(want), i  # also tells -0.0 from 0.0


def test_a_wider_table_lands_as_todays_path_lands_it(spark: SparkSession) -> None:
    schema = {"type": "record", "name": "W", "fields": [
        {"name": "n", "type": "int"}, {"name": "f", "type": ["null", "float"]},
        {"name": "l", "type": "long"},
        {"name": "p", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5,
                               "scale": 2}},
        {"name": "r", "type": {"type": "record", "name": "In", "fields": [
            {"name": "x", "type": "int"}, {"name": "z", "type": "string"}]}}]}
    # the table's struct lacks the writer's r.z: the cast drops it
    table = JType(STRUCT, (("n", JType(LONG)), ("f", JType(DOUBLE)), ("l", JType(DOUBLE)),
                           ("p", decimal(20, 2)), ("extra", JType(STRING)),
                           ("r", JType(STRUCT, (("x", JType(LONG)),)))))
    rng = random.Random(3)
    records = [{"n": rng.randrange(-(2 ** 31), 2 ** 31),
                "f": rng.choice([None, struct.unpack("<f", struct.pack(
                    "<f", rng.uniform(-1e20, 1e20)))[0]]),
                "l": rng.randrange(-(2 ** 63), 2 ** 63),
                "p": Decimal(rng.randrange(-99999, 100000)).scaleb(-2),
                "r": {"x": rng.randrange(-99, 99), "z": "gone"}} for _ in range(300)]
    bodies = [body(schema, r) for r in records]
    fast, errors = decode_bodies(bodies, schema, table, schema_id=5)
    assert errors == {}
    mine, today = fast.to_pylist(), todays_rows(spark, schema, bodies, table)
    assert mine == today
    assert repr(mine) == repr(today)


def test_framed_values_by_schema_id_through_the_registry(registry: RegistryProcess) -> None:
    """A Kafka value column as the lane has it: two versions of a schema, a null value,
    values that are not framed, of an unknown id, or garbled — rows where
    FramedDecoder's JSON has them (the fields a version lacks null), its reasons for the
    rest, in order."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from bench.registry_lake import SCHEMA as V1
    from odradek.pipeline.avro_arrow import FramedAvro

    v2 = {**V1, "fields": [*V1["fields"], {"name": "battery", "type": ["null", "int"],
                                           "default": None}]}
    client = SchemaRegistryClient({"url": registry.url})
    ctx = SerializationContext("framed-test", MessageField.VALUE)
    first, second = AvroSerializer(client, json.dumps(V1)), AvroSerializer(client, json.dumps(v2))
    event = {"device_id": "d", "ts": 1, "place": {"site": "s", "floor": 2}, "kind": "HUM",
             "value": 0.5, "tags": ["x"]}
    one = first({**event, "device_id": "one"}, ctx) or b""
    two = second({**event, "device_id": "two", "battery": 7}, ctx) or b""
    values = [one, None, two, b"plain", b"\x00" + (4242).to_bytes(4, "big") + one[5:],
              one[:5] + b"\xff", first({**event, "device_id": "three"}, ctx), two[:-1]]
    decoder = FramedDecoder(registry.url)
    ids = [int.from_bytes(v[1:5], "big") for v in (one, two)]
    target = decoder.declared_type(ids)
    assert target is not None
    table, errors = FramedAvro(decoder, target).decode(pa.array(values, pa.binary()))

    want_rows, want_errors = [], {}
    for i, value in enumerate(values):
        text, why = decoder.decode(value)
        if why is not None:
            want_errors[i] = why
        elif text is None:
            want_rows.append(dict.fromkeys(target.names()))
        else:
            want_rows.append({**dict.fromkeys(target.names()), **json.loads(text)})
    assert errors == want_errors
    assert table.to_pylist() == want_rows
    assert [r["device_id"] for r in want_rows] == ["one", None, "two", "three"]
