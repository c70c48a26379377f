"""The Arrow lane's task side, without Spark: what a task writes, quarantines, or hands to
the Spark path. (tests/pipeline/spark/test_arrow_lane.py compares it with the Spark path.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odradek.pipeline.arrow_lane import (
    Fallback,
    LaneSpec,
    batch_type,
    canonical,
    conform,
    run_task,
    union,
)
from odradek.pipeline.jsontypes import BOOLEAN, DOUBLE, LIST, LONG, STRING, STRUCT, JType

DAY_US = 86_400_000_000
T0 = 1_700_000_000_000_000  # 2023-11-14, in microseconds


def records(values: list[bytes | None], start_us: int = T0, step_us: int = 1) -> pa.RecordBatch:
    n = len(values)
    return pa.RecordBatch.from_arrays([
        pa.array([b"k%d" % i for i in range(n)], pa.binary()),
        pa.array(values, pa.binary()),
        pa.array(["t"] * n, pa.string()),
        pa.array([0] * n, pa.int32()),
        pa.array(range(100, 100 + n), pa.int64()),
        pa.array([start_us + i * step_us for i in range(n)], pa.timestamp("us", tz="UTC")),
    ], names=["key", "value", "topic", "partition", "offset", "timestamp"])


def run(tmp_path: Path, batches: list[pa.RecordBatch], table: JType | None = None,
        **spec: Any) -> list[dict[str, Any]]:
    lane = LaneSpec(f"file://{tmp_path}/batch", table or JType(STRUCT, ()),
                    collect_rows=spec.pop("collect_rows", 100),
                    collect_bytes=spec.pop("collect_bytes", 1024), **spec)
    out = list(run_task(lane, iter(batches)))
    return [row for b in out for row in b.to_pylist()]


def written(answers: list[dict[str, Any]]) -> pa.Table:
    files = [a["path"].removeprefix("file://") for a in answers if a["kind"] == "file"]
    return pa.concat_tables([pq.read_table(f) for f in files], promote_options="permissive")


def test_values_land_as_columns_with_the_kafka_columns(tmp_path: Path) -> None:
    values = [b'{"b":1,"a":{"y":"s","x":true},"l":[1.5,2]}', None, b'{"b":2,"n":null,"e":[]}']
    answers = run(tmp_path, [records(values)])
    [f] = [a for a in answers if a["kind"] == "file"]
    assert f["rows"] == 3 and f["topic"] == "t"
    data = written(answers)
    assert data.column_names[:5] == ["_topic", "_partition", "_offset", "_timestamp", "_key"]
    # new fields sorted by name at every depth, as Spark's inference lists them; a field
    # seen only as null or [] has no type yet and no column
    assert data.column_names[5:] == ["a", "b", "l"]
    assert data.schema.field("a").type == pa.struct([("x", pa.bool_()), ("y", pa.string())])
    rows = data.to_pylist()
    assert [r["b"] for r in rows] == [1, None, 2]  # the tombstone is a row of nulls
    assert rows[0]["l"] == [1.5, 2.0] and rows[0]["_key"] == "k0"
    assert [a["offset"] for a in answers if a["kind"] == "end"] == [102]


def test_bad_records_are_quarantined_and_the_rest_lands(tmp_path: Path) -> None:
    values = [b'{"a":1}', b'{"a":2', b"\xff\xfe{", b"5", b'{"a":3,}', b'{"a":"x\x01"}',
              b"", b'{"a":4}']
    answers = run(tmp_path, [records(values)])
    bad = [a for a in answers if a["kind"] == "bad"]
    assert [b["offset"] for b in bad] == [101, 102, 103, 106, 104, 105]
    assert bad[0]["raw"] == b'{"a":2' and bad[0]["key"] == "k1"
    assert bad[0]["ts"] == T0 + 1
    assert written(answers)["a"].to_pylist() == [1, 4]


@pytest.mark.parametrize("value, why", [
    (b' {"a":1}', "space or other text around it"),
    (b'{"a":1}{"a":2}', "more than one JSON object"),
    (b'{"a":1,"a":2}', "JSON reader"),  # Python takes it: Spark decides
    (b'{"a":"x"}', "JSON reader"),  # a string where the table has a long
    (b'{"a":1.5}', "JSON reader"),
    (b'{"t":"2024-01-01T00:00:00"}', "inferred timestamp"),
])
def test_what_the_lane_cannot_reproduce_goes_to_the_spark_path(
        tmp_path: Path, value: bytes, why: str) -> None:
    table = JType(STRUCT, (("a", JType(LONG)),))
    answers = run(tmp_path, [records([b'{"a":1}', value])], table)
    [answer] = answers
    assert answer["kind"] == "fallback" and why in answer["error"]
    assert not list((tmp_path / "batch").iterdir())  # its files are gone


def test_too_many_bad_records_for_the_driver_go_to_the_spark_path(tmp_path: Path) -> None:
    answers = run(tmp_path, [records([b"x"] * 5)], collect_rows=4)
    assert [a["kind"] for a in answers] == ["fallback"]
    answers = run(tmp_path, [records([b"x" * 2000])], collect_bytes=1000)
    assert [a["kind"] for a in answers] == ["fallback"]


def test_one_file_per_day_and_the_table_types_kept(tmp_path: Path) -> None:
    table = JType(STRUCT, (("v", JType(DOUBLE)), ("s", JType(STRING))))
    values = [b'{"v":1}', b'{"v":2.5,"s":"x"}', b'{"w":true}']
    answers = run(tmp_path, [records(values, T0 - T0 % DAY_US - 1, 1)], table)
    files = [a for a in answers if a["kind"] == "file"]
    assert sorted(f["rows"] for f in files) == [1, 2]
    data = written(answers)
    assert data.schema.field("v").type == pa.float64()
    assert sorted(data.column("v").to_pylist(), key=str) == [1.0, 2.5, None]
    schemas = [pa.ipc.read_schema(pa.py_buffer(f["arrow_schema"])) for f in files]
    assert batch_type(schemas, table) == JType(STRUCT, (
        ("v", JType(DOUBLE)), ("s", JType(STRING)), ("w", JType(BOOLEAN))))


def test_chunks_and_tasks_merge_as_one_batch_would(tmp_path: Path) -> None:
    # long in one chunk, double in another: the batch's type is double, and the file
    # written with longs is conformed to it
    answers = run(tmp_path, [records([b'{"n":1,"o":{"b":1}}']),
                             records([b'{"n":2.5,"o":{"a":"z"}}'])], chunk_rows=1)
    files = [a for a in answers if a["kind"] == "file"]
    schemas = [pa.ipc.read_schema(pa.py_buffer(f["arrow_schema"])) for f in files]
    merged = batch_type(schemas, JType(STRUCT, ()))
    assert merged == JType(STRUCT, (
        ("n", JType(DOUBLE)),
        ("o", JType(STRUCT, (("a", JType(STRING)), ("b", JType(LONG))))),
    ))
    paths = [conform(f["path"], s, merged) for f, s in zip(files, schemas, strict=True)]
    tables = [pq.read_table(p.removeprefix("file://")) for p in paths]
    assert all(t.schema.field("n").type == pa.float64() for t in tables)
    assert [r for t in tables for r in t.column("o").to_pylist()] == [
        {"a": None, "b": 1}, {"a": "z", "b": None}]


def test_types_merge_like_one_inference() -> None:
    table = JType(STRUCT, (("z", JType(LONG)),))
    seen = JType(STRUCT, (("b", JType(LONG)), ("z", JType(LONG)), ("a", JType(LIST,
                                                                          element=JType(LONG)))))
    assert canonical(seen, table).names() == ["z", "a", "b"]
    assert union(JType(LONG), JType(DOUBLE)) == JType(DOUBLE)
    with pytest.raises(Fallback):
        union(JType(LONG), JType(STRING))


def test_a_field_of_only_empty_values_gets_no_column(tmp_path: Path) -> None:
    answers = run(tmp_path, [records([b'{"a":{},"b":[],"c":null,"d":[[]],"e":1}'])])
    assert written(answers).column_names[5:] == ["e"]
    assert json.loads(json.dumps([a["kind"] for a in answers])) == ["file", "end"]


def test_a_sliced_batch_is_read_from_its_own_values(tmp_path: Path) -> None:
    # Arrow batches may be views into larger buffers: the framing check and the reader
    # must look at the view's values only
    batch = records([b'x', b'{"a":1}', b'{"a":2', b'{"a":3}', b'y']).slice(1, 3)
    answers = run(tmp_path, [batch])
    assert written(answers)["a"].to_pylist() == [1, 3]
    assert [a["raw"] for a in answers if a["kind"] == "bad"] == [b'{"a":2']


def test_a_field_named_like_a_kafka_column_goes_to_the_spark_path(tmp_path: Path) -> None:
    [answer] = run(tmp_path, [records([b'{"_offset":1,"a":2}'])])
    assert answer["kind"] == "fallback" and "_offset" in answer["error"]
