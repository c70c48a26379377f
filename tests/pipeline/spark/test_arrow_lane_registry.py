"""Registry-framed Avro through the Arrow lane lands what the Spark path lands: the same
records (two schema versions in one batch on two partitions, so one task's file is cast
into the other's newer types; a nested record, an enum, an array, nullable fields, a
timestamp, a decimal; bad bodies, an unframed value, an unknown id, a NaN, a tombstone)
ingested once through each give equal tables, quarantines (with their reasons) and
conflict records. Real Spark, pyiceberg, broker and schema registry."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyiceberg.exceptions import NoSuchTableError
from pyspark.sql import SparkSession

from odradek.pipeline import arrow_lane, lake_writer
from odradek.pipeline.jsontypes import JType
from odradek.pipeline.lake_catalog import LakeConfig, open_catalog
from tests.pipeline.helpers import create_topic, produce_values, topic
from tests.pipeline.spark.test_arrow_lane import run_both
from tests.pipeline.spark.test_lake import scan
from tests.registry.conftest import RegistryProcess

TABLE = "iot.lane_registered"
PLACE = {"type": "record", "name": "Place", "fields": [
    {"name": "site", "type": "string"}, {"name": "floor", "type": "int"}]}
V1 = {"type": "record", "name": "Reading", "namespace": "iot", "fields": [
    {"name": "id", "type": "string"},
    {"name": "place", "type": PLACE},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["TEMP", "HUM"]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "value", "type": ["null", "double"], "default": None},
    {"name": "count", "type": "int"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10,
                               "scale": 2}}]}
# A compatible next version: the nested record gains a field, count widens to long, and a
# new nullable column.
V2 = {**V1, "fields": [
    {"name": "id", "type": "string"},
    {"name": "place", "type": {**PLACE, "fields": [
        *PLACE["fields"], {"name": "wing", "type": ["null", "string"], "default": None}]}},
    *V1["fields"][2:5],
    {"name": "count", "type": "long"},
    *V1["fields"][6:],
    {"name": "battery", "type": ["null", "int"], "default": None}]}


def reading(i: int, **more: Any) -> dict[str, Any]:
    return {"id": f"r-{i}", "place": {"site": ["oslo", "rome"][i % 2], "floor": i},
            "kind": ["TEMP", "HUM"][i % 2], "tags": ["a", "b", "c"][: i % 4],
            "value": None if i % 3 == 0 else i / 7, "count": i,
            "at": 1_700_000_000_000 + i * 1000, "price": Decimal(i) / 4, **more}


def landed(lake: LakeConfig) -> dict[str, Any]:
    table = open_catalog(lake).load_table(TABLE)
    rows = sorted(scan(lake, TABLE).to_pylist(), key=lambda r: (r["_partition"], r["_offset"]))
    try:
        bad = scan(lake, TABLE + "__quarantine").to_pylist()
    except NoSuchTableError:  # made by the first bad record
        bad = []
    quarantine = sorted((r["_partition"], r["_offset"], r["raw"], r["error"]) for r in bad)
    conflicts = [{k: c[k] for k in ("column", "table_type", "seen_type", "resolution")}
                 for c in json.loads(table.properties.get("odradek.conflicts", "[]"))]
    return {"schema": [(f.name, str(f.field_type)) for f in table.schema().fields],
            "rows": [{k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()}
                     for r in rows],
            "quarantine": quarantine, "conflicts": conflicts}


@pytest.mark.timeout(900)  # four ingests and a registry, however slow the machine
def test_the_lane_lands_registry_avro_as_the_spark_path_does(
        spark: SparkSession, bootstrap: str, registry: RegistryProcess, lake_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    name = create_topic(bootstrap, topic(), partitions=2)
    client = SchemaRegistryClient({"url": registry.url})
    ctx = SerializationContext(name, MessageField.VALUE)
    first, second = (AvroSerializer(client, json.dumps(v)) for v in (V1, V2))
    old = [first(reading(i), ctx) or b"" for i in range(6)]
    new = [second(reading(i, battery=i * 10 if i % 2 else None,
                          place={"site": "lima", "floor": i, "wing": "n" if i else None},
                          count=2**40 + i), ctx) or b""
           for i in range(10, 15)]
    unknown = b"\x00" + (987654).to_bytes(4, "big") + old[1][5:]
    garbled = old[2][:5] + b"\xff\xff\xff"
    nan = second(reading(20, value=math.nan), ctx) or b""
    # partition 0: version 1 only (its file is cast into version 2's types); partition 1:
    # version 2, and each kind of bad record
    produce_values(bootstrap, name, [*old[:3], garbled, b'{"id":"json"}', old[3]],
                   partition=0)
    produce_values(bootstrap, name, [new[0], unknown, new[1], nan, b"\x00\x01", *new[2:]],
                   partition=1)
    produce_values(bootstrap, name, [None], partition=1)  # type: ignore[list-item]
    lakes = {lane: LakeConfig.local(lake_dir / str(lane)) for lane in (True, False)}
    conformed: list[str] = []

    def conform(uri: str, schema: pa.Schema, table_t: JType) -> str:
        path = arrow_lane.conform(uri, schema, table_t)
        if path != uri:
            conformed.append(path)
        return path

    monkeypatch.setattr(lake_writer, "conform", conform)
    results = run_both(spark, bootstrap, lake_dir, name, monkeypatch, registry.url, TABLE)
    [lane] = results[True]
    assert "lane" in lane.timings  # the lane took the batch: no Spark pass of its own
    assert "infer" not in lane.timings and "write" not in lane.timings
    assert (lane.rows, lane.quarantined) == (4 + 5 + 1, 5)
    assert len(conformed) == 1  # partition 0's file, cast into version 2's columns
    after_first = landed(lakes[True])
    assert after_first == landed(lakes[False])
    errors = {q[3] for q in after_first["quarantine"]}
    first_id = client.get_version(f"{name}-value", 1).schema_id
    assert "schema id 987654 is not in the registry" in errors
    assert "not in Confluent's wire format (no magic byte and schema id)" in errors
    assert any(e.startswith(f"not a record of schema {first_id}") for e in errors)
    by_id = {r["id"]: r for r in after_first["rows"]}
    assert by_id["r-0"]["count"] == 0 and by_id["r-0"]["battery"] is None
    assert by_id["r-11"]["count"] == 2**40 + 11 and by_id["r-11"]["battery"] == 110
    assert by_id["r-11"]["place"] == {"site": "lima", "floor": 11, "wing": "n"}
    assert by_id["r-1"]["price"] == Decimal("0.25")

    # a later batch of version 1 alone lands in the table's wider columns
    produce_values(bootstrap, name, [first(reading(i), ctx) or b"" for i in range(30, 33)],
                   partition=0)
    later = run_both(spark, bootstrap, lake_dir, name, monkeypatch, registry.url, TABLE)
    [lane] = later[True]
    assert "lane" in lane.timings and "write" not in lane.timings
    assert landed(lakes[True]) == landed(lakes[False])


@pytest.mark.timeout(600)
def test_json_schema_values_take_the_spark_path(
        spark: SparkSession, bootstrap: str, registry: RegistryProcess, lake_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The lane decodes Avro only: a batch with a JSON Schema id is the Spark path's."""
    name = create_topic(bootstrap, topic(), partitions=1)
    schema = {"type": "object", "properties": {"id": {"type": "string"},
                                               "n": {"type": "integer"}}}
    serialize = JSONSerializer(json.dumps(schema), SchemaRegistryClient({"url": registry.url}))
    ctx = SerializationContext(name, MessageField.VALUE)
    produce_values(bootstrap, name, [serialize({"id": f"j{i}", "n": i}, ctx) or b""
                                     for i in range(3)])
    results = run_both(spark, bootstrap, lake_dir, name, monkeypatch, registry.url, TABLE)
    [handed] = results[True]
    assert "lane" in handed.timings and "write" in handed.timings
    assert handed.rows == 3
    assert landed(LakeConfig.local(lake_dir / "True")) == landed(
        LakeConfig.local(lake_dir / "False"))
