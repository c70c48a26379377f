"""`odradek lake query`: SQL over a real Iceberg table (pyiceberg, SQLite catalog) through
DuckDB, now and back in time by snapshot id, timestamp and Kafka offset; bad input is one
line."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from typer.testing import CliRunner

from odradek.cli.lake import app as lake_app
from odradek.pipeline.lake_catalog import LakeConfig, open_catalog
from tests.pipeline.test_maintenance import TABLE, FakeIngest

runner = CliRunner()


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[FakeIngest, list[str]]:
    """One table for every test here: they only read it."""
    config = LakeConfig.local(tmp_path_factory.mktemp("query") / "lake")
    ingest = FakeIngest(open_catalog(config))
    for _ in range(3):  # offsets 0-4, 5-9, 10-14 of each topic
        ingest.commit()
    return ingest, ["--catalog-uri", config.catalog_uri, "--warehouse", config.warehouse]


def query(args: list[str], sql: str, *extra: str) -> list[dict[str, object]]:
    result = runner.invoke(lake_app, ["query", sql, "--json", *args, *extra])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.output.splitlines()]


def error(args: list[str], sql: str, *extra: str) -> str:
    result = runner.invoke(lake_app, ["query", sql, *args, *extra])
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return lines[0]


COUNT = "SELECT _topic, count(*) AS n, max(_offset) AS last FROM iot.events GROUP BY 1 ORDER BY 1"


def test_sql_over_the_current_table(lake: tuple[FakeIngest, list[str]]) -> None:
    _, args = lake
    assert query(args, COUNT) == [{"_topic": "fleet.camera", "n": 15, "last": 14},
                                  {"_topic": "fleet.door", "n": 15, "last": 14}]
    table_view = runner.invoke(lake_app, ["query", COUNT, *args])
    assert "2 rows (iot.events at snapshot" in table_view.output


def test_time_travel_by_snapshot_timestamp_and_offset(
        lake: tuple[FakeIngest, list[str]]) -> None:
    ingest, args = lake
    snaps = sorted(ingest.catalog.load_table(TABLE).metadata.snapshots,
                   key=lambda s: s.timestamp_ms)
    first = query(args, COUNT, "--snapshot-id", str(snaps[0].snapshot_id))
    assert [r["n"] for r in first] == [5, 5]

    second_at = dt.datetime.fromtimestamp(snaps[1].timestamp_ms / 1000, dt.UTC)
    as_of = query(args, COUNT, "--as-of", second_at.isoformat())
    assert [r["n"] for r in as_of] == [10, 10]
    before_any = error(args, COUNT, "--as-of", "2000-01-01T00:00:00Z")
    assert before_any == "error: iot.events had no snapshot yet at 2000-01-01T00:00:00+00:00"

    # offset 7 of fleet.door came in the second batch (offsets 5-9)
    assert [r["n"] for r in query(args, COUNT, "--as-of-offset", "fleet.door:0:7")] == [10, 10]
    assert [r["n"] for r in query(args, COUNT, "--as-of-offset", "fleet.door:0:10")] == [15, 15]
    assert "does not hold fleet.door:0:15 yet (it holds up to offset 14)" in error(
        args, COUNT, "--as-of-offset", "fleet.door:0:15")
    assert "holds no records of fleet.door partition 3" in error(
        args, COUNT, "--as-of-offset", "fleet.door:3:0")


def test_unknown_table_and_bad_sql_are_one_line(lake: tuple[FakeIngest, list[str]]) -> None:
    _, args = lake
    assert error(args, "SELECT * FROM iot.nope").startswith(
        "error: no table iot.nope in sqlite:///")
    assert error(args, "SELEC 1").startswith("error: bad SQL: Parser Error: syntax error")
    assert error(args, "SELECT nope FROM iot.events").startswith(
        'error: bad SQL: Binder Error: Referenced column "nope" not found')
    assert error(args, COUNT, "--snapshot-id", "42").startswith(
        "error: no table in the query has snapshot 42")
    assert "give TOPIC:PARTITION:OFFSET" in error(args, COUNT, "--as-of-offset", "fleet.door")
