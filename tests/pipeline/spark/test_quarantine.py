"""The quarantine is split off in the inference pass: a batch with bad records runs no more
Spark jobs than one without (one, for a table that has columns), a batch without makes no
quarantine commit, and the records land the same when there are too many for the driver
and Spark writes them."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

import pytest
from pyiceberg.exceptions import NoSuchTableError
from pyspark.sql import DataFrame, SparkSession

from odradek.pipeline.lake_catalog import LakeConfig, open_catalog
from odradek.pipeline.lake_writer import BatchResult, LakeWriter

TABLE = "q.events"
BAD = [b'{"device_id": "cam-9", "motion": tru', b"\xff\xfe\x00garbage", b"[1, 2, 3]"]
WHEN = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)
SCHEMA = ("topic string, partition int, offset long, timestamp timestamp, key binary, "
          "value binary")


def batch(spark: SparkSession, values: list[bytes], first_offset: int = 0) -> DataFrame:
    return spark.createDataFrame(
        [("t", i % 2, first_offset + i, WHEN, b"k%d" % i, v) for i, v in enumerate(values)],
        SCHEMA)


def good(n: int, start: int = 0) -> list[bytes]:
    return [json.dumps({"device_id": f"d{i}", "reading": i}).encode()
            for i in range(start, start + n)]


def recorded(tmp_path: Path, *ends: int) -> Path:
    """A checkpoint whose offset log holds each batch's end offsets (spares the writer the
    Spark job that would find them)."""
    ckpt = tmp_path / "ckpt"
    (ckpt / "offsets").mkdir(parents=True)
    for batch_id, end in enumerate(ends):
        (ckpt / "offsets" / str(batch_id)).write_text(
            f'v1\n{{}}\n{json.dumps({"t": {"0": end, "1": end}})}\n')
    return ckpt


def jobs_of(spark: SparkSession, writer: LakeWriter, df: DataFrame,
            batch_id: int) -> tuple[BatchResult, int]:
    group = f"lake-{uuid.uuid4().hex[:8]}"
    sc = spark.sparkContext
    sc.setJobGroup(group, "lake batch")
    try:
        result = writer.write_batch(df, batch_id)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return result, len(sc.statusTracker().getJobIdsForGroup(group))


def quarantined(lake: LakeConfig) -> list[dict[str, object]]:
    return sorted(open_catalog(lake).load_table(TABLE + "__quarantine").scan().to_arrow()
                  .to_pylist(), key=lambda r: r["_offset"])  # type: ignore[arg-type, return-value]


def test_bad_records_cost_no_spark_job_and_a_clean_batch_no_quarantine_commit(
        spark: SparkSession, tmp_path: Path) -> None:
    lake = LakeConfig.local(tmp_path / "lake")
    writer = LakeWriter(lake, TABLE, recorded(tmp_path, 6, 12, 18), query_id="q1")
    first = writer.write_batch(batch(spark, good(6)), 0)  # makes the table's columns
    clean, clean_jobs = jobs_of(spark, writer, batch(spark, good(6, 6), 6), 1)
    assert (first.rows, clean.rows, clean.quarantined) == (6, 6, 0)
    assert "quarantine" not in first.timings and "quarantine" not in clean.timings
    assert clean_jobs == 1  # read, parse, infer and write: one pass
    with pytest.raises(NoSuchTableError):  # no table made, no commit, for an empty quarantine
        open_catalog(lake).load_table(TABLE + "__quarantine")

    dirty, dirty_jobs = jobs_of(spark, writer, batch(spark, good(3, 12) + BAD, 12), 2)
    assert (dirty.rows, dirty.quarantined) == (3, 3)
    assert dirty_jobs == clean_jobs  # the bad records came back with the inference pass
    rows = quarantined(lake)
    assert [r["raw"] for r in rows] == BAD and [r["_offset"] for r in rows] == [15, 16, 17]
    assert rows[0]["error"].startswith("malformed JSON")  # type: ignore[union-attr]
    assert rows[1]["error"].startswith("not UTF-8")  # type: ignore[union-attr]
    assert rows[2]["error"] == "not a JSON object but a list"
    assert {(r["_topic"], r["_key"], r["_timestamp"]) for r in rows[:1]} == {
        ("t", "k3", WHEN)}
    table = open_catalog(lake).load_table(TABLE)
    assert len(table.scan().to_arrow()) == 15

    # a replay of the batch is recognised in both tables
    again = writer.write_batch(batch(spark, good(3, 12) + BAD, 12), 2)
    assert again.skipped and len(quarantined(lake)) == 3


@pytest.mark.slow  # one more batch through Spark; the default run has the driver's path
def test_more_bad_records_than_the_driver_takes_are_written_by_spark_alike(
        spark: SparkSession, tmp_path: Path) -> None:
    lake = LakeConfig.local(tmp_path / "lake")
    writer = LakeWriter(lake, TABLE, query_id="q1")
    writer.quarantine_collect_rows = 2
    result = writer.write_batch(batch(spark, good(2) + BAD), 0)
    assert (result.rows, result.quarantined) == (2, 3)
    rows = quarantined(lake)
    assert [r["raw"] for r in rows] == BAD and [r["_offset"] for r in rows] == [2, 3, 4]
    assert rows[2]["error"] == "not a JSON object but a list"
    assert rows[0]["_timestamp"] == WHEN and rows[0]["_key"] == "k2"
    # the same in a one-pass batch (the table has columns now)
    second = writer.write_batch(batch(spark, good(2, 5) + BAD, 5), 1)
    assert (second.rows, second.quarantined) == (2, 3) and "infer" not in second.timings
    assert [r["_offset"] for r in quarantined(lake)] == [2, 3, 4, 7, 8, 9]
    assert len(open_catalog(lake).load_table(TABLE).scan().to_arrow()) == 4
