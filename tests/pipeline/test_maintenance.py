"""Lake maintenance on a real Iceberg table (pyiceberg, SQLite catalog): compaction keeps
every row and the Kafka-offsets bookkeeping, survives an ingest committing meanwhile, and
snapshot expiry deletes only files no snapshot needs."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog

from odradek.pipeline import maintenance
from odradek.pipeline.catalog_tools import history
from odradek.pipeline.lake_catalog import (
    PROP_OFFSETS,
    SUMMARY_BATCH,
    SUMMARY_OFFSETS,
    LakeConfig,
    ensure_table,
    open_catalog,
    recorded_offsets,
)
from odradek.pipeline.maintenance import compact, expire, table_size

TABLE = "iot.events"
DAY = dt.datetime(2026, 11, 27, 8, 0, tzinfo=dt.UTC)


class FakeIngest:
    """Commits batches the way the lake writer does: data files, the batch's end offsets
    in the snapshot summary, the merged offsets in the table property."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.next_offset = {"fleet.camera": 0, "fleet.door": 0}
        self.batch = 0
        ensure_table(catalog, TABLE)

    def commit(self, rows_per_topic: int = 5) -> None:
        table = self.catalog.load_table(TABLE)
        rows: list[dict[str, Any]] = []
        for topic in self.next_offset:
            for _ in range(rows_per_topic):
                off = self.next_offset[topic]
                rows.append({"_topic": topic, "_partition": 0, "_offset": off,
                             "_timestamp": DAY + dt.timedelta(seconds=off), "_key": f"d{off}"})
                self.next_offset[topic] += 1
        end = {t: {"0": o} for t, o in self.next_offset.items()}
        tx = table.transaction()
        tx.append(pa.Table.from_pylist(rows, schema=table.schema().as_arrow()),
                  snapshot_properties={SUMMARY_OFFSETS: json.dumps(end),
                                       SUMMARY_BATCH: str(self.batch)})
        tx.set_properties({PROP_OFFSETS: json.dumps(end)})
        tx.commit_transaction()
        self.batch += 1


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    return open_catalog(LakeConfig.local(tmp_path / "lake"))


def rows(catalog: Catalog) -> list[tuple[str, int]]:
    arrow = catalog.load_table(TABLE).scan().to_arrow()
    return sorted(zip(arrow["_topic"].to_pylist(), arrow["_offset"].to_pylist(), strict=True))


def parquet_on_disk(tmp_path: Path) -> set[str]:
    return {str(p) for p in (tmp_path / "lake" / "warehouse").rglob("*.parquet")}


def test_compaction_merges_small_files_keeping_rows_and_offsets(catalog: Catalog) -> None:
    ingest = FakeIngest(catalog)
    for _ in range(12):
        ingest.commit()
    before_rows, before_offsets = rows(catalog), recorded_offsets(catalog.load_table(TABLE))
    assert table_size(catalog.load_table(TABLE)).files == 24  # a file per topic and batch

    result = compact(catalog, TABLE)

    table = catalog.load_table(TABLE)
    assert (result.partitions, result.files_replaced, result.files_written) == (2, 24, 2)
    assert table_size(table).files == 2 and table_size(table).rows == 120
    assert rows(catalog) == before_rows
    assert recorded_offsets(table) == before_offsets  # the ingest resumes where it was
    newest = history(catalog, TABLE)[-1]
    assert newest["end_offsets"] == {"fleet.camera": {"0": 60}, "fleet.door": {"0": 60}}
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None
    assert snap.summary.additional_properties[maintenance.SUMMARY_MAINTENANCE] == "compact"
    assert compact(catalog, TABLE).files_replaced == 0  # nothing small left to merge


def test_an_ingest_commit_during_compaction_is_kept(catalog: Catalog,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    ingest = FakeIngest(catalog)
    for _ in range(4):
        ingest.commit()
    write_group = maintenance._write_group

    def ingest_meanwhile(*args: Any) -> list[str]:
        paths = write_group(*args)
        if ingest.batch == 4:  # between our read of the table and our commit
            ingest.commit()
        return paths

    monkeypatch.setattr(maintenance, "_write_group", ingest_meanwhile)
    result = compact(catalog, TABLE)

    assert result.files_replaced == 8
    table = catalog.load_table(TABLE)
    assert table_size(table).rows == 50 and len(rows(catalog)) == 50
    assert table_size(table).files == 2 + 2  # the compacted files and the new batch's
    assert recorded_offsets(table)[("fleet.door", 0)] == 25


def test_expiry_drops_old_snapshots_and_the_files_only_they_used(catalog: Catalog,
                                                                 tmp_path: Path) -> None:
    ingest = FakeIngest(catalog)
    for _ in range(6):
        ingest.commit()
    compact(catalog, TABLE)
    assert len(parquet_on_disk(tmp_path)) == 12 + 2
    before = rows(catalog)

    kept_all = expire(catalog, TABLE, older_than=dt.timedelta(hours=1))
    assert kept_all.snapshots_expired == 0 and len(parquet_on_disk(tmp_path)) == 14

    result = expire(catalog, TABLE, older_than=dt.timedelta(0))

    table = catalog.load_table(TABLE)
    assert result.snapshots_expired == 6 and len(table.metadata.snapshots) == 1
    assert len(parquet_on_disk(tmp_path)) == 2
    assert rows(catalog) == before
    assert recorded_offsets(table)[("fleet.camera", 0)] == 30
    ingest.commit()  # the ingest carries on after the expiry
    assert len(rows(catalog)) == 70


def test_a_commit_that_races_the_compactions_commit_makes_it_go_round_again(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    ingest = FakeIngest(catalog)
    for _ in range(4):
        ingest.commit()
    offsets_of = maintenance.recorded_offsets
    calls = []

    def ingest_commits_first(table: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:  # after the compaction loaded the table, before it commits
            ingest.commit()
        return offsets_of(table)

    monkeypatch.setattr(maintenance, "recorded_offsets", ingest_commits_first)
    result = compact(catalog, TABLE)

    assert len(calls) >= 2 and result.files_replaced == 8
    table = catalog.load_table(TABLE)
    assert table_size(table).rows == 50 and len(rows(catalog)) == 50
    assert table_size(table).files == 4
    newest = history(catalog, TABLE)[-1]  # the compaction's summary: the newest offsets
    assert newest["end_offsets"] == {"fleet.camera": {"0": 25}, "fleet.door": {"0": 25}}


def test_orphan_removal_spares_a_writers_uncommitted_file_and_removes_an_old_one(
        catalog: Catalog, tmp_path: Path) -> None:
    ingest = FakeIngest(catalog)
    for _ in range(3):
        ingest.commit()
    data = Path(catalog.load_table(TABLE).location().removeprefix("file://")) / "data"
    in_flight = data / "ingest" / "q" / "7" / "part-0.parquet"  # written, not committed yet
    orphan = data / "ingest" / "q" / "1" / "part-0.parquet"  # left by a crash long ago
    for path in (in_flight, orphan):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"PAR1")
    two_hours_ago = dt.datetime.now(dt.UTC).timestamp() - 7200
    os.utime(orphan, (two_hours_ago, two_hours_ago))
    before = rows(catalog)

    removed = maintenance.remove_orphans(catalog, TABLE, older_than=dt.timedelta(hours=1))

    assert removed == 1 and in_flight.exists() and not orphan.exists()
    assert rows(catalog) == before and len(parquet_on_disk(tmp_path)) == 6 + 1


def test_expiry_of_many_snapshots_is_one_commit(catalog: Catalog) -> None:
    ingest = FakeIngest(catalog)
    for _ in range(12):
        ingest.commit(1)
    table = catalog.load_table(TABLE)
    log_before = len(table.metadata.metadata_log)

    result = expire(catalog, TABLE, older_than=dt.timedelta(0), keep_last=3)

    table = catalog.load_table(TABLE)
    assert result.snapshots_expired == 9 and len(table.metadata.snapshots) == 3
    assert len(table.metadata.metadata_log) == log_before + 1  # one metadata version more
    assert len(rows(catalog)) == 24


def test_expiry_follows_the_tables_iceberg_properties(catalog: Catalog,
                                                      tmp_path: Path) -> None:
    ingest = FakeIngest(catalog)
    for _ in range(8):
        ingest.commit(1)
    assert expire(catalog, TABLE).snapshots_expired == 0  # Iceberg's default age: 5 days

    catalog.load_table(TABLE).transaction().set_properties({
        maintenance.PROP_MAX_SNAPSHOT_AGE: "0",
        maintenance.PROP_MIN_SNAPSHOTS: "3"}).commit_transaction()
    result = expire(catalog, TABLE)
    assert result.snapshots_expired == 5 and len(catalog.load_table(TABLE).metadata.snapshots) == 3
    assert len(rows(catalog)) == 16

    catalog.load_table(TABLE).transaction().set_properties({
        maintenance.PROP_MIN_SNAPSHOTS: "0"}).commit_transaction()
    with pytest.raises(ValueError, match=r"history\.expire\.min-snapshots-to-keep='0'"):
        expire(catalog, TABLE)
    from typer.testing import CliRunner

    from odradek.cli.lake import app as lake_app

    lake = LakeConfig.local(tmp_path / "lake")
    refused = CliRunner().invoke(lake_app, ["maintain", TABLE, "--catalog-uri",
                                            lake.catalog_uri, "--warehouse", lake.warehouse])
    assert refused.exit_code != 0
    assert "history.expire.min-snapshots-to-keep='0'" in refused.output
    assert "Traceback" not in refused.output and len(refused.output.strip().splitlines()) == 1


def test_up_upkeep_bounds_the_snapshots_each_table_keeps(catalog: Catalog,
                                                         tmp_path: Path) -> None:
    from odradek.pipeline.up import (
        UP_RETENTION_S,
        UP_SNAPSHOTS_KEPT,
        LakeKeeper,
        Progress,
        UpOptions,
    )

    lake = LakeConfig.local(tmp_path / "lake")
    events = FakeIngest(catalog)
    quarantine = ensure_table(catalog, TABLE + "__quarantine", quarantine=True)
    quarantine.transaction().set_properties({  # a table's own setting is honoured
        maintenance.PROP_MIN_SNAPSHOTS: "4"}).commit_transaction()
    for _ in range(9):
        events.commit(1)
        table = catalog.load_table(TABLE + "__quarantine")
        table.append(pa.Table.from_pylist([{"_topic": "t", "raw": b"x"}],
                                          schema=table.schema().as_arrow()))
    keeper = LakeKeeper(lake, UpOptions(retain_snapshots_s=0, snapshots_kept=2), Progress())

    for _ in range(2):  # the bound holds run after run, whatever was committed meanwhile
        assert keeper.expire_all(catalog) == {TABLE: 2, TABLE + "__quarantine": 2}
        events.commit(1)
    props = catalog.load_table(TABLE).properties
    assert props[maintenance.PROP_MAX_SNAPSHOT_AGE] == "0"
    assert props[maintenance.PROP_MIN_SNAPSHOTS] == "2"
    assert len(rows(catalog)) == 2 * 11  # expiry never drops a row of the current snapshot

    # without the options: a table's own properties, else up's defaults
    catalog.load_table(TABLE + "__quarantine").transaction().set_properties({
        maintenance.PROP_MIN_SNAPSHOTS: "1"}).commit_transaction()
    ensure_table(catalog, "iot.device_stats")
    kept = LakeKeeper(lake, UpOptions(), Progress()).expire_all(catalog)
    assert kept == {TABLE: 2, TABLE + "__quarantine": 1, "iot.device_stats": 0}
    fresh = catalog.load_table("iot.device_stats").properties
    assert fresh[maintenance.PROP_MIN_SNAPSHOTS] == str(UP_SNAPSHOTS_KEPT)
    assert fresh[maintenance.PROP_MAX_SNAPSHOT_AGE] == str(int(UP_RETENTION_S * 1000))


def test_lake_maintain_follows_the_tables_expiry_properties_unless_told(
        catalog: Catalog, tmp_path: Path) -> None:
    """`odradek lake maintain` without --retention expires by the table's own properties
    (Iceberg's 5 days by default: nothing of a fresh table); --retention overrides them."""
    from typer.testing import CliRunner

    from odradek.cli.lake import app as lake_app

    lake = LakeConfig.local(tmp_path / "lake")
    args = ["maintain", TABLE, "--catalog-uri", lake.catalog_uri, "--warehouse",
            lake.warehouse, "--json"]
    runner = CliRunner()

    def maintain(*extra: str) -> dict[str, Any]:
        done = runner.invoke(lake_app, [*args, *extra])
        assert done.exit_code == 0, done.output
        return dict(json.loads(done.output))

    ingest = FakeIngest(catalog)
    for _ in range(6):
        ingest.commit(1)
    first = maintain()
    assert first["files_replaced"] == 12 and first["snapshots_expired"] == 0
    assert len(catalog.load_table(TABLE).metadata.snapshots) == 7  # 6 batches, 1 compaction

    catalog.load_table(TABLE).transaction().set_properties({  # as `odradek up` writes them
        maintenance.PROP_MAX_SNAPSHOT_AGE: "0",
        maintenance.PROP_MIN_SNAPSHOTS: "3"}).commit_transaction()
    data = Path(catalog.load_table(TABLE).location().removeprefix("file://")) / "data"
    in_flight = data / "ingest" / "q" / "9" / "part-0.parquet"  # a writer's, not committed
    in_flight.parent.mkdir(parents=True)
    in_flight.write_bytes(b"PAR1")
    second = maintain()
    assert second["snapshots_expired"] == 4
    assert len(catalog.load_table(TABLE).metadata.snapshots) == 3
    # unreferenced files go at an hour old at the earliest: not the writer's, nor yet the
    # twelve the compaction replaced
    assert second["files_deleted"] == 0 and len(parquet_on_disk(tmp_path)) == 12 + 2 + 1
    assert len(rows(catalog)) == 12

    catalog.load_table(TABLE).transaction().set_properties({
        maintenance.PROP_MAX_SNAPSHOT_AGE: str(86_400_000),
        maintenance.PROP_MIN_SNAPSHOTS: "1"}).commit_transaction()
    assert maintain()["snapshots_expired"] == 0  # a day's age: all three are younger
    told = maintain("--retention", "0s")  # the operator's retention wins over the table's
    assert told["snapshots_expired"] == 2 and told["rows"] == 12
    # … and bounds the unreferenced files' age too: the compacted two are left
    assert len(parquet_on_disk(tmp_path)) == 2 and not in_flight.exists()
    assert len(catalog.load_table(TABLE).metadata.snapshots) == 1 and len(rows(catalog)) == 12

    usage = runner.invoke(lake_app, ["maintain", "--help"], env={"COLUMNS": "300"})
    assert "Default: the table's history.expire.max-snapshot-age-ms" in usage.output


def test_maintain_without_a_retention_keeps_what_the_table_says(catalog: Catalog) -> None:
    ingest = FakeIngest(catalog)
    for _ in range(5):
        ingest.commit(1)
    _, expired, size = maintenance.maintain(catalog, TABLE)
    assert expired.snapshots_expired == 0 and size.rows == 10
    catalog.load_table(TABLE).transaction().set_properties({
        maintenance.PROP_MAX_SNAPSHOT_AGE: "0"}).commit_transaction()
    _, expired, size = maintenance.maintain(catalog, TABLE)
    assert expired.snapshots_expired == 5 and len(expired.kept) == 1 and size.rows == 10
