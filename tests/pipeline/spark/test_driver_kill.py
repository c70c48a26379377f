"""The ingest's driver SIGKILLed exactly mid-commit, then restarted: every record lands
exactly once, and no reader of the table ever sees part of a batch.

The test starts the driver (`odradek lake ingest`) itself, with driver_kill_hooks/ on its
PYTHONPATH: that `sitecustomize` wraps the lake writer's commit path and kills the
driver's process group (Python and its JVM) at one point of one batch, so the kill lands
where a timer never would — Parquet written but not committed, the catalog commit half
done, the Iceberg commit done but not Spark's. Nothing in odradek is there for the test.

A reader sees a table at one of its snapshots, so "never saw a partial batch" is checked
on every snapshot the table has: each holds exactly the good records below the offsets its
batches recorded, none twice. The short version chains every kill point through one
topic in local mode; the fault loop kills the driver of a standalone-cluster ingest at
one point per run, 20 runs.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyiceberg.table import Table
from pyspark.sql import SparkSession

from odradek.pipeline.ingest import IngestJob, start_ingest
from odradek.pipeline.lake_catalog import (
    PROP_OFFSETS,
    SUMMARY_OFFSETS,
    LakeConfig,
    last_batch,
    open_catalog,
)
from odradek.pipeline.lake_writer import BatchResult, checkpoint_query_id
from tests.pipeline.helpers import create_topic, produce, topic
from tests.pipeline.spark.standalone import (
    SMALL_EXECUTOR,
    Cluster,
    cluster_env,
    standalone_cluster,
)
from tests.processes import started

HOOKS = Path(__file__).resolve().parent / "driver_kill_hooks"
TABLE = "iot.killed"
QUARANTINE = TABLE + "__quarantine"
PARTITIONS = 2
# (quarantine first: a batch's bad records are committed before its good ones)
POINTS = ("quarantine-metadata-written", "quarantine-committed", "before-commit",
          "metadata-written", "sink-returned")

Coordinate = tuple[int, int]  # (partition, offset)


@dataclass
class Feed:
    """What the test produced: record i went to partition i % 2 at offset i // 2."""

    topic: str
    good: set[Coordinate]
    bad: set[Coordinate]


def _feed(bootstrap: str, records: int) -> Feed:
    name = create_topic(bootstrap, topic("dk"), partitions=PARTITIONS)
    values, good, bad = [], set(), set()
    for i in range(records):
        at = (i % PARTITIONS, i // PARTITIONS)
        if i % 23 == 5:  # a few malformed ones in every batch: the quarantine commits too
            values.append(b'{"device": "d1", "n": ')
            bad.add(at)
        else:
            values.append(json.dumps({"device": f"d{i % 7}", "n": i}).encode())
            good.add(at)
    produce(bootstrap, name, [{"value": v, "partition": i % PARTITIONS}
                              for i, v in enumerate(values)])
    return Feed(name, good, bad)


@dataclass
class Driver:
    """`odradek lake ingest --available-now` of one topic into one lake, run as a process
    of its own (its JVM in its process group), optionally armed to kill itself."""

    bootstrap: str
    feed: Feed
    work: Path
    master: str
    per_trigger: int
    conf: tuple[str, ...] = ()
    runs: int = 0

    @property
    def lake(self) -> LakeConfig:
        return LakeConfig(f"sqlite:///{self.work / 'lake' / 'catalog.db'}",
                          (self.work / "lake" / "warehouse").as_uri())

    def log(self) -> Path:
        """The output of the latest run."""
        return self.work / f"driver-{self.runs}.log"

    def run(self, kill_at: str | None = None, from_batch: int = 1) -> str | None:
        """Run until the driver dies at `kill_at` (returns "<point> <batch>") or, without
        one, until it has caught up and stopped by itself (returns None)."""
        self.runs += 1
        lake = self.work / "lake"
        log = self.log()
        mark = self.work / f"killed-{self.runs}"
        env = cluster_env(self.work)
        env["PYTHONPATH"] = os.pathsep.join([str(HOOKS), env["PYTHONPATH"]])
        if kill_at is not None:
            env.update(ODRADEK_KILL_AT=kill_at, ODRADEK_KILL_FROM_BATCH=str(from_batch),
                       ODRADEK_KILL_MARK=str(mark))
        cmd = [sys.executable, "-m", "odradek", "lake", "ingest", "--bootstrap-server",
               self.bootstrap, "--topic", self.feed.topic, "--table", TABLE,
               "--master", self.master, "--catalog-uri", self.lake.catalog_uri,
               "--warehouse", str(lake / "warehouse"), "--checkpoint", str(lake / "checkpoint"),
               "--available-now", "--max-offsets-per-trigger", str(self.per_trigger),
               "--conf", "spark.ui.enabled=false", *self.conf]
        with started(cmd, log, env=env) as proc:
            code = proc.wait(600)
        tail = log.read_text(errors="replace")[-3000:]
        if kill_at is None:
            assert code == 0, tail
            return None
        assert code == -signal.SIGKILL, f"the driver was not killed at {kill_at}: {tail}"
        assert mark.is_file(), tail
        point, batch = mark.read_text().split()
        assert point == kill_at and int(batch) >= from_batch
        return mark.read_text().strip()


def _coordinates(rows: dict[str, list[int]]) -> list[Coordinate]:
    return list(zip(rows["_partition"], rows["_offset"], strict=True))


def assert_whole_batches(lake: LakeConfig, name: str, expected: set[Coordinate]) -> int:
    """Every snapshot of the table holds exactly the records of `expected` below the end
    offsets its batches recorded, none twice: whichever snapshot a reader read, it saw
    whole batches only. Returns how many snapshots there are."""
    table = open_catalog(lake).load_table(name)
    covered: dict[int, int] = {}
    for snap in table.snapshots():  # oldest first, one line of history
        summary = snap.summary.additional_properties if snap.summary else {}
        for parts in json.loads(summary.get(SUMMARY_OFFSETS, "{}")).values():
            for part, end in parts.items():
                covered[int(part)] = max(covered.get(int(part), 0), int(end))
        seen = _coordinates(table.scan(snapshot_id=snap.snapshot_id,
                                       selected_fields=("_partition", "_offset"))
                            .to_arrow().to_pydict())
        assert len(seen) == len(set(seen)), f"{name} snapshot {snap.snapshot_id}: duplicates"
        wanted = {(p, o) for p, o in expected if o < covered.get(p, 0)}
        assert set(seen) == wanted, (
            f"{name} snapshot {snap.snapshot_id} covering {covered}: "
            f"{len(wanted - set(seen))} records missing, {len(set(seen) - wanted)} extra")
    return len(table.snapshots())


def assert_consistent(driver: Driver) -> None:
    assert_whole_batches(driver.lake, TABLE, driver.feed.good)
    assert_whole_batches(driver.lake, QUARANTINE, driver.feed.bad)


def assert_exactly_once(driver: Driver) -> None:
    assert_consistent(driver)
    catalog = open_catalog(driver.lake)
    for name, expected in ((TABLE, driver.feed.good), (QUARANTINE, driver.feed.bad)):
        rows = _coordinates(catalog.load_table(name).scan(
            selected_fields=("_partition", "_offset")).to_arrow().to_pydict())
        assert sorted(rows) == sorted(expected), name
    ends = {p: max(o for q, o in driver.feed.good | driver.feed.bad if q == p) + 1
            for p in range(PARTITIONS)}
    recorded = json.loads(catalog.load_table(TABLE).properties[PROP_OFFSETS])
    assert recorded == {driver.feed.topic: {str(p): e for p, e in ends.items()}}


def _version(metadata_file: str) -> int:
    return int(Path(metadata_file).name.split("-", 1)[0])


def assert_left_mid_commit(driver: Driver, point: str, batch: int) -> None:
    """The kill left what its point says: the test is not passing by missing it."""
    lake = driver.work / "lake"
    query_id = checkpoint_query_id(lake / "checkpoint")
    assert query_id is not None
    catalog = open_catalog(driver.lake)
    table = catalog.load_table(TABLE)
    done = last_batch(table, query_id)
    quarantine = catalog.load_table(QUARANTINE)
    if point.startswith("quarantine"):
        assert last_batch(quarantine, query_id) == (
            batch if point == "quarantine-committed" else batch - 1)
    if point != "sink-returned":
        assert done == batch - 1

    def metadata_ahead(t: Table) -> bool:  # a newer metadata file than the catalog has
        folder = Path(t.location().removeprefix("file://")) / "metadata"
        newest = max(_version(str(p)) for p in folder.glob("*.metadata.json"))
        return newest == _version(t.metadata_location) + 1

    assert metadata_ahead(quarantine) == (point == "quarantine-metadata-written")
    assert metadata_ahead(table) == (point == "metadata-written")
    location = Path(table.location().removeprefix("file://"))
    if point == "before-commit":  # the batch's Parquet files are there, in no snapshot
        written = {f"file://{p}" for p in (location / "data" / "ingest" / query_id
                                             / str(batch)).rglob("*.parquet")}
        assert written
        assert not written & {t.file.file_path for t in table.scan().plan_files()}
    if point == "sink-returned":  # in the table; not in Spark's commit log
        assert done == batch
        assert not (lake / "checkpoint" / "commits" / str(batch)).exists()
        assert (lake / "checkpoint" / "offsets" / str(batch)).exists()


@pytest.mark.timeout(900)
def test_driver_killed_at_each_commit_point_then_restarted_lands_everything_once(
        spark: SparkSession, bootstrap: str, tmp_path: Path) -> None:
    """One topic, one lake: a driver is killed at each point in turn, each restart
    replaying the batch the last one died in; then the suite's own session resumes from
    the same checkpoint and catches up. (Each kill costs a driver start, about 20 s, so
    the default run takes the two points inside and after the Iceberg commit: the new
    metadata written but not yet the catalog's, and the commit done but not Spark's
    commit log; the fault loop has every point.)"""
    points = ("metadata-written", "sink-returned")
    # three batches: 0 lands, every kill hits 1 (or its replay), the catch-up adds 2
    driver = Driver(bootstrap, _feed(bootstrap, 240), tmp_path, master="local[1]",
                    per_trigger=80)
    killed = []
    for point in points:
        killed.append(driver.run(kill_at=point))
        assert_left_mid_commit(driver, point, batch=1)
        assert_consistent(driver)
    # batch 0 landed; then every start died in batch 1, which each restart replayed
    assert killed == [f"{point} 1" for point in points]

    job = IngestJob(bootstrap=bootstrap, table=TABLE, lake=driver.lake,
                    checkpoint=tmp_path / "lake" / "checkpoint", topics=[driver.feed.topic],
                    available_now=True, max_offsets_per_trigger=driver.per_trigger)
    results: list[BatchResult] = []
    query = start_ingest(spark, job, on_batch=results.append)
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()
    assert_exactly_once(driver)
    # killed after its commit, batch 1 was in the table already: the replay skipped it
    assert [(r.batch_id, r.skipped) for r in results] == [(1, True), (2, False)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with standalone_cluster(tmp_path_factory.mktemp("standalone"), workers=1, cores=1) as c:
        yield c


@pytest.mark.slow
@pytest.mark.timeout(7200)
@pytest.mark.parametrize("run", range(20))
def test_driver_kill_fault_loop(cluster: Cluster, bootstrap: str, tmp_path: Path,
                                run: int) -> None:
    """On the standalone cluster: run n kills the driver at point n % 5 of batch 1 or 2,
    restarts it until caught up, and finds every record exactly once."""
    driver = Driver(bootstrap, _feed(bootstrap, 400 + 40 * run), tmp_path,
                    master=cluster.master_url, per_trigger=100, conf=tuple(SMALL_EXECUTOR))
    point = POINTS[run % len(POINTS)]
    killed = driver.run(kill_at=point, from_batch=1 + (run // len(POINTS)) % 2)
    assert_left_mid_commit(driver, point, batch=int(str(killed).split()[1]))
    assert_consistent(driver)
    driver.run()
    assert_exactly_once(driver)
    if point == "sink-returned":  # committed before the kill: the replay skipped it
        assert f"batch {str(killed).split()[1]}: already in the table" in driver.log().read_text()
