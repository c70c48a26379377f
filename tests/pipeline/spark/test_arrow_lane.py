"""The Arrow lane lands what the Spark path lands: the same records ingested twice, once
through each, give equal tables, quarantines and conflict records. Real Spark, pyiceberg
and broker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from odradek.pipeline.ingest import IngestJob
from odradek.pipeline.lake_catalog import LakeConfig, open_catalog
from odradek.pipeline.lake_writer import BatchResult, LakeWriter
from tests.pipeline.helpers import create_topic, produce_values, topic
from tests.pipeline.spark.test_lake import TABLE, ingest, scan

# Everything the lane takes: nested objects in any key order, a field that is a long in
# one record and a double in another, nulls, empty objects and lists, tombstones, escapes,
# big numbers, odd names, and bad records of each kind.
FIRST: list[bytes | None] = [
    b'{"id":1,"kind":"a","place":{"site":"oslo","floor":3},"tags":["x","y"],"v":1}',
    b'{"v":2.5,"id":2,"kind":"b","place":{"floor":1,"site":"rome"},"tags":[]}',
    None,
    b'{"id":3,"note":"caf\\u00e9 \\"q\\" \\ud83d\\ude00","big":12345678901234567890,'
    b'"odd name.x":true,"empty":{},"nothing":null,"deep":{"a":{"b":{"c":[1,2]}}}}',
    b'{"id":4,"place":null,"tags":null,"v":-0}',
    b'{"id":5,"kind":"a"',  # cut short
    b"\xff\xfe{\"id\":6",  # garbage
    b"42",  # JSON, not an object
    b'["id",7]',
    b'{"id":8,}',  # framed like an object, refused by both parsers
    b"",
    b'{"id":9,"place":{"site":"lima","floor":2,"wing":"n"},"v":3}',
]
# Then a batch the lane hands to the Spark path (a string where the table has a long:
# a conflict), and one it takes again.
SECOND: list[bytes | None] = [b'{"id":"ten","v":4}', b'{"id":11,"v":5}']
THIRD: list[bytes | None] = [b'{"id":12,"v":6,"place":{"site":"oslo","floor":4}}']


def landed(lake: LakeConfig) -> dict[str, Any]:
    table = open_catalog(lake).load_table(TABLE)
    rows = sorted(scan(lake).to_pylist(), key=lambda r: (r["_partition"], r["_offset"]))
    quarantine = sorted((r["_partition"], r["_offset"], r["raw"], r["error"])
                        for r in scan(lake, TABLE + "__quarantine").to_pylist())
    conflicts = [{k: c[k] for k in ("column", "table_type", "seen_type", "resolution")}
                 for c in json.loads(table.properties.get("odradek.conflicts", "[]"))]
    return {"schema": [(f.name, str(f.field_type)) for f in table.schema().fields],
            "rows": rows, "quarantine": quarantine, "conflicts": conflicts}


def run_both(spark: SparkSession, bootstrap: str, lake_dir: Path, name: str,
             monkeypatch: pytest.MonkeyPatch,
             schema_registry: str | None = None,
             table: str = TABLE) -> dict[bool, list[BatchResult]]:
    """The topic ingested into two lakes, with the lane and without it."""
    results: dict[bool, list[BatchResult]] = {}
    for lane in (True, False):
        monkeypatch.setattr(LakeWriter, "arrow_lane", lane)
        job = IngestJob(bootstrap=bootstrap, table=table,
                        lake=LakeConfig.local(lake_dir / str(lane)),
                        checkpoint=lake_dir / str(lane) / "ckpt", topics=[name],
                        available_now=True, schema_registry=schema_registry)
        results[lane] = ingest(spark, job)
    return results


def test_the_lane_lands_what_the_spark_path_lands(
        spark: SparkSession, bootstrap: str, lake_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    name = create_topic(bootstrap, topic(), partitions=1)
    lakes = {lane: LakeConfig.local(lake_dir / str(lane)) for lane in (True, False)}

    produce_values(bootstrap, name, FIRST)
    first = run_both(spark, bootstrap, lake_dir, name, monkeypatch)
    [lane] = first[True]
    assert "lane" in lane.timings and "infer" not in lane.timings  # the lane took it
    assert (lane.rows, lane.quarantined) == (6, 6)
    assert landed(lakes[True]) == landed(lakes[False])

    produce_values(bootstrap, name, SECOND)
    second = run_both(spark, bootstrap, lake_dir, name, monkeypatch)
    [handed] = second[True]
    assert "lane" in handed.timings and ("write" in handed.timings)  # the Spark path's
    assert [c.column for c in handed.conflicts] == ["id"]

    produce_values(bootstrap, name, THIRD)
    third = run_both(spark, bootstrap, lake_dir, name, monkeypatch)
    assert "infer" not in third[True][0].timings and "write" not in third[True][0].timings
    after = landed(lakes[True])
    assert after == landed(lakes[False])
    assert ("id__string", "string") in after["schema"]
    assert [r["id"] for r in after["rows"]] == [1, 2, None, 3, 4, 9, None, 11, 12]
