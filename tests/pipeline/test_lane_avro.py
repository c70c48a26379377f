"""The registry lane's casts: a lane file decoded into one schema version's columns, cast
(arrow_lane.conform's cast) into a newer version's wider columns, holds exactly what
decoding straight into the wider columns gives — which avro_arrow's Spark tests prove is
what the Spark path lands. Casts that would not give it are refused (the Spark path)."""

from __future__ import annotations

import io
import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odradek.pipeline.arrow_lane import LaneSpec, run_task
from odradek.pipeline.avro_arrow import decode_bodies
from odradek.pipeline.jsontypes import STRUCT, JType, to_arrow
from odradek.pipeline.lane_avro import RegistryTask, exact_cast
from odradek.pipeline.registry_values import FramedDecoder, SchemaLookupError
from odradek.pipeline.schema_mapping import avro_type, merge_declared

INNER = {"type": "record", "name": "In", "fields": [{"name": "n", "type": "int"}]}
OLD = {"type": "record", "name": "R", "namespace": "t", "fields": [
    {"name": "i", "type": "int"},
    {"name": "f", "type": ["null", "float"]},
    {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5,
                           "scale": 2}},
    {"name": "r", "type": INNER},
    {"name": "a", "type": {"type": "array", "items": "int"}},
    {"name": "m", "type": {"type": "map", "values": "float"}},
    {"name": "s", "type": "string"}]}
# a newer version: each number wider, the nested record a field more, a new column
NEW = {**OLD, "fields": [
    {"name": "i", "type": "long"},
    {"name": "f", "type": ["null", "double"]},
    {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12,
                           "scale": 2}},
    {"name": "r", "type": {**INNER, "fields": [
        {"name": "n", "type": "long"}, {"name": "w", "type": ["null", "string"]}]}},
    {"name": "a", "type": {"type": "array", "items": "long"}},
    {"name": "m", "type": {"type": "map", "values": "double"}},
    {"name": "s", "type": "string"},
    {"name": "extra", "type": ["null", "int"]}]}


def body(schema: Any, record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def shown(table: pa.Table) -> list[str]:
    return [repr(r) for r in table.to_pylist()]  # repr: -0.0 differs from 0.0


def test_old_version_cast_into_the_new_columns_equals_decoding_into_them() -> None:
    edges = [2**31 - 1, -2**31, 0, -1, 1]
    floats = [0.1, -0.0, 3.4028234663852886e38, 1.401298464324817e-45, None, 1e-40]
    records = [{"i": edges[k % 5], "f": floats[k % 6],
                "d": Decimal(99999 - k * 1663) / 100 * (-1) ** k,
                "r": {"n": edges[(k + 2) % 5]}, "a": edges[: k % 6],
                "m": {f"k{j}": 2.5 ** j for j in range(k % 3)}, "s": f"é{k}"}
               for k in range(60)]
    bodies = [body(OLD, r) for r in records]
    narrow = avro_type(OLD)
    wide = merge_declared([narrow, avro_type(NEW)])
    assert wide is not None
    decoded, errors = decode_bodies(bodies, OLD, narrow)
    assert errors == {}
    straight, _ = decode_bodies(bodies, OLD, wide)
    wanted = pa.schema([pa.field(n, to_arrow(t)) for n, t in wide.fields])
    for f in decoded.schema:
        assert exact_cast(f.type, wanted.field(f.name).type), f.name
    cast = pa.table({f.name: (decoded.column(f.name).cast(f.type)
                              if f.name in decoded.column_names
                              else pa.nulls(decoded.num_rows, f.type)) for f in wanted})
    assert cast.schema == straight.schema
    assert shown(cast) == shown(straight)
    assert not any(isinstance(v, float) and math.isnan(v)
                   for r in cast.to_pylist() for v in r.values())


@pytest.mark.parametrize(("source", "target"), [
    (pa.int64(), pa.string()),  # Spark's text of a number is not Arrow's
    (pa.int64(), pa.int32()),
    (pa.float64(), pa.float32()),
    (pa.float64(), pa.int64()),
    (pa.decimal128(5, 2), pa.decimal128(12, 3)),  # Iceberg never changes a scale
    (pa.decimal128(12, 2), pa.decimal128(5, 2)),
    (pa.struct([("a", pa.int32()), ("b", pa.int32())]), pa.struct([("a", pa.int32())])),
    (pa.list_(pa.int64()), pa.list_(pa.int32())),
    (pa.string(), pa.binary()),
])
def test_casts_that_would_not_land_the_same_are_refused(source: pa.DataType,
                                                        target: pa.DataType) -> None:
    assert not exact_cast(source, target)


def test_an_integer_a_float_column_does_not_hold_exactly_fails_the_cast() -> None:
    """The lane then hands the batch to the Spark path (lake_writer catches it)."""
    assert exact_cast(pa.int64(), pa.float64())
    with pytest.raises(pa.ArrowInvalid):
        pa.array([2**53 + 1]).cast(pa.float64())


class Registry(FramedDecoder):
    """FramedDecoder over fixed schemas by id, as a registry would serve them."""

    def __init__(self, schemas: dict[int, dict[str, Any]]) -> None:
        super().__init__("http://registry.invalid")
        self.schemas = schemas

    def _get(self, path: str, **params: str) -> Any:
        schema_id = int(path.rsplit("/", 1)[1])
        if schema_id not in self.schemas:
            raise SchemaLookupError("not found")
        return self.schemas[schema_id]


def framed(schema_id: int, raw: bytes) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + raw


def run(registry: Registry, values: list[bytes | None], tmp_path: Path,
        table: JType | None = None) -> tuple[list[dict[str, Any]], list[pa.Table]]:
    n = len(values)
    batch = pa.record_batch({
        "key": pa.array([None] * n, pa.binary()), "value": pa.array(values, pa.binary()),
        "topic": pa.array(["t"] * n), "partition": pa.array([0] * n, pa.int32()),
        "offset": pa.array(range(n), pa.int64()),
        "timestamp": pa.array([1_700_000_000_000_000] * n, pa.timestamp("us", tz="UTC"))})
    spec = LaneSpec(f"file://{tmp_path}/batch", table or JType(STRUCT, ()), 100, 65536,
                    avro=registry, task=RegistryTask)
    answers = pa.Table.from_batches(list(run_task(spec, iter([batch])))).to_pylist()
    files = [pq.read_table(a["path"].removeprefix("file://")) for a in answers
             if a["kind"] == "file"]
    return answers, files


def test_a_version_whose_every_value_is_bad_adds_no_column(tmp_path: Path) -> None:
    """The Spark path declares only the ids of values that decoded: so does the task."""
    registry = Registry({1: {"schema": json.dumps(OLD)}, 2: {"schema": json.dumps(NEW)}})
    good = body(OLD, {"i": 1, "f": None, "d": Decimal("1.00"), "r": {"n": 2}, "a": [],
                      "m": {}, "s": "x"})
    answers, files = run(registry, [framed(1, good), framed(2, b"\xff\xff"), None], tmp_path)
    assert [a["offset"] for a in answers if a["kind"] == "id"] == [1]
    assert [(a["offset"], a["error"][:24]) for a in answers if a["kind"] == "bad"] == [
        (1, "not a record of schema 2")]
    [file] = files
    assert "extra" not in file.column_names
    assert file.schema.field("i").type == pa.int32()  # version 1's type, as declared
    assert file.column("s").to_pylist() == ["x", None]  # the tombstone: a row of nulls


def test_a_schema_that_is_not_avro_hands_the_batch_over(tmp_path: Path) -> None:
    registry = Registry({1: {"schema": json.dumps(OLD)}, 7: {
        "schemaType": "JSON", "schema": json.dumps(
            {"type": "object", "properties": {"a": {"type": "string"}}})}})
    answers, files = run(registry, [framed(7, b"{}")], tmp_path)
    assert [a["kind"] for a in answers] == ["fallback"] and files == []
    assert "not Avro" in answers[0]["error"]
    assert not list(tmp_path.rglob("*.parquet"))  # its files are gone
