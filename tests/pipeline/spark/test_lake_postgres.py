"""The lake's catalog in a real PostgreSQL: three ingest jobs at once — two into the same
table, one into another — race for their commits and lose none of them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from odradek.pipeline.ingest import IngestJob, start_ingest
from odradek.pipeline.lake_catalog import (
    SUMMARY_BATCH,
    SUMMARY_QUERY,
    LakeConfig,
    open_catalog,
    recorded_offsets,
    summaries,
)
from odradek.pipeline.lake_writer import BatchResult, checkpoint_query_id
from tests.pipeline.helpers import create_topic, produce, topic
from tests.postgres import postgres_server

RECORDS = 240


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


def test_concurrent_ingest_jobs_share_a_postgres_catalog_without_losing_a_commit(
        spark: SparkSession, bootstrap: str, pg_url: str, tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    lake = LakeConfig(pg_url, warehouse.as_uri())
    names = [create_topic(bootstrap, topic("pg")) for _ in range(3)]
    for name in names:
        produce(bootstrap, name, [
            {"value": json.dumps({"device_id": f"d{i % 9}", "reading": i}).encode(),
             "key": f"k{i}".encode(), "partition": i % 2} for i in range(RECORDS)])
    tables = ["iot.shared", "iot.shared", "iot.other"]
    jobs = [IngestJob(bootstrap=bootstrap, table=t, lake=lake, checkpoint=tmp_path / f"ck{i}",
                      topics=[n], available_now=True, max_offsets_per_trigger=40)
            for i, (t, n) in enumerate(zip(tables, names, strict=True))]
    results: list[list[BatchResult]] = [[], [], []]
    # three queries of one session: their batches run side by side, and so do the commits
    queries = []
    for i, job in enumerate(jobs):
        queries.append(start_ingest(spark, job, on_batch=results[i].append))
        _wait_past_start(queries[-1])  # (their start-ups one at a time, on a busy machine)
    assert len({q.name for q in queries}) == 3
    for q in queries:
        q.awaitTermination(300)
        assert q.exception() is None, q.exception()

    catalog = open_catalog(lake)
    shared = catalog.load_table("iot.shared")
    rows = shared.scan().to_arrow()
    coords = sorted(zip(rows["_topic"].to_pylist(), rows["_partition"].to_pylist(),
                        rows["_offset"].to_pylist(), strict=True))
    expected = sorted((n, i % 2, i // 2) for n in names[:2] for i in range(RECORDS))
    assert coords == expected  # every record of both topics, once
    assert catalog.load_table("iot.other").scan().to_arrow().num_rows == RECORDS
    # every batch of each query left its own snapshot: none was lost in the races
    for job, batches in zip(jobs[:2], results[:2], strict=True):
        written = [b.batch_id for b in batches if b.rows and not b.skipped]
        assert len(written) >= RECORDS // 40 // 2  # several batches each
        query_id = checkpoint_query_id(job.checkpoint)
        committed = [p[SUMMARY_BATCH] for _, p in summaries(shared)
                     if p.get(SUMMARY_QUERY) == query_id]
        assert sorted(map(int, committed)) == sorted(written)
    offsets = recorded_offsets(shared)
    assert {offsets[(n, p)] for n in names[:2] for p in (0, 1)} == {RECORDS // 2}


def _wait_past_start(query: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while query.isActive and query.status["message"].startswith("Initializing"):
        assert time.monotonic() < deadline, query.status
        time.sleep(0.1)
