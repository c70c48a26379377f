"""The lake fed by registered schemas: Confluent-framed Avro values from confluent-kafka's
AvroSerializer, decoded by schema id through odradek's registry, land in Iceberg with the
registered schema's types (pipeline/schema_mapping.py: nested records, a timestamp, an
int, a union of several types as a struct of options, a map, a date, a decimal); a new compatible
version adds a column; an unknown id, and bytes that do not decode, are quarantined."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyiceberg.types import (
    DateType,
    DecimalType,
    IntegerType,
    MapType,
    StructType,
    TimestamptzType,
)
from pyspark.sql import SparkSession

from odradek.pipeline.ingest import IngestJob
from odradek.pipeline.lake_catalog import LakeConfig, open_catalog
from tests.pipeline.helpers import create_topic, produce_values, topic
from tests.pipeline.spark.test_lake import ingest, scan
from tests.registry.conftest import RegistryProcess

TABLE = "iot.registered"
V1 = {"type": "record", "name": "Reading", "namespace": "iot", "fields": [
    {"name": "device_id", "type": "string"},
    {"name": "place", "type": {"type": "record", "name": "Place", "fields": [
        {"name": "site", "type": "string"}, {"name": "floor", "type": "int"}]}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["TEMP", "HUM"]}},
    {"name": "value", "type": "double"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "count", "type": "int"},
    {"name": "code", "type": ["null", "string", "long"], "default": None},
    {"name": "attrs", "type": {"type": "map", "values": "string"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10,
                               "scale": 2}}]}
V2 = {**V1, "fields": [*V1["fields"],  # type: ignore[list-item]
                       {"name": "battery", "type": ["null", "int"], "default": None}]}


@pytest.mark.timeout(600)  # two ingests and a registry, however slow the machine
def test_registered_avro_lands_nested_and_a_new_version_adds_a_column(
        spark: SparkSession, bootstrap: str, registry: RegistryProcess,
        lake_dir: Path) -> None:
    name = create_topic(bootstrap, topic())
    client = SchemaRegistryClient({"url": registry.url})
    ctx = SerializationContext(name, MessageField.VALUE)
    first = AvroSerializer(client, json.dumps(V1))
    values = [first({"device_id": f"th-{i}", "place": {"site": "oslo", "floor": i},
                     "kind": "TEMP", "value": 20.5 + i, "at": 1_700_000_000_000 + i,
                     "count": i, "code": ["x", i, None][i], "attrs": {"k": str(i)},
                     "day": dt.date(2026, 11, 27 - i),
                     "price": Decimal("12345678.91") + i}, ctx)
              for i in range(3)]
    unknown = b"\x00" + (999999).to_bytes(4, "big") + (values[0] or b"")[5:]
    garbled = (values[0] or b"")[:5] + b"\xff\xff\xff"
    produce_values(bootstrap, name, [v for v in values if v is not None] + [unknown, garbled])
    job = IngestJob(bootstrap=bootstrap, table=TABLE, lake=LakeConfig.local(lake_dir),
                    checkpoint=lake_dir / "ckpt", topics=[name], available_now=True,
                    schema_registry=registry.url)
    ingest(spark, job)
    rows = sorted(scan(job.lake, TABLE).to_pylist(), key=lambda r: r["device_id"])
    assert [(r["device_id"], r["place"]["site"], r["place"]["floor"], r["kind"], r["value"],
             r["count"], r["code"], dict(r["attrs"])) for r in rows] == [
        ("th-0", "oslo", 0, "TEMP", 20.5, 0, {"string": "x", "long": None}, {"k": "0"}),
        ("th-1", "oslo", 1, "TEMP", 21.5, 1, {"string": None, "long": 1}, {"k": "1"}),
        ("th-2", "oslo", 2, "TEMP", 22.5, 2, None, {"k": "2"})]
    assert [r["at"] for r in rows] == [
        dt.datetime.fromtimestamp(1_700_000_000 + i / 1000, dt.UTC) for i in range(3)]
    assert [(r["day"], r["price"]) for r in rows] == [
        (dt.date(2026, 11, 27 - i), Decimal("12345678.91") + i) for i in range(3)]
    columns = {f.name: f.field_type for f in open_catalog(job.lake).load_table(
        TABLE).schema().fields}
    assert isinstance(columns["at"], TimestamptzType)
    assert isinstance(columns["count"], IntegerType)
    assert isinstance(columns["attrs"], MapType) and isinstance(columns["day"], DateType)
    assert columns["price"] == DecimalType(10, 2)
    code = columns["code"]
    assert isinstance(code, StructType) and [f.name for f in code.fields] == ["string", "long"]
    errors = sorted(q["error"] for q in scan(job.lake, TABLE + "__quarantine").to_pylist())
    assert len(errors) == 2 and errors[1] == "schema id 999999 is not in the registry"
    first_id = client.get_latest_version(f"{name}-value").schema_id
    assert errors[0].startswith(f"not a record of schema {first_id}")

    second = AvroSerializer(client, json.dumps(V2))
    produce_values(bootstrap, name, [second({
        "device_id": "th-9", "place": {"site": "rome", "floor": 2}, "kind": "HUM",
        "value": 0.4, "at": 1, "count": 9, "code": None, "attrs": {},
        "day": dt.date(2026, 1, 1), "price": Decimal("0.01"), "battery": 88}, ctx)
        or b""])
    ingest(spark, job)
    table = scan(job.lake, TABLE)
    assert "battery" in table.column_names
    by_device = {r["device_id"]: r for r in table.to_pylist()}
    assert by_device["th-9"]["battery"] == 88 and by_device["th-0"]["battery"] is None
