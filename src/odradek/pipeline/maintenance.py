"""Keeping a lake table healthy while it is written: compaction and snapshot expiry.

A streaming ingest adds a few small files per partition and batch (one per Spark task),
so a table a few minutes old holds thousands of files of some kilobytes, and every reader
pays for opening each one. `compact()` merges a partition's small files into files of
about the target size, in one Iceberg snapshot that deletes the old files and adds the
new ones: readers see the same rows before and after. `expire()` drops snapshots older
than a retention (never the current one) and deletes the files only they referenced; by
default it follows the table's own Iceberg properties, `history.expire.max-snapshot-age-ms`
(older snapshots go) and `history.expire.min-snapshots-to-keep` (the newest ones that stay
whatever their age), so a short age and a count bound the snapshots a table keeps.

Both run beside a live ingest. Iceberg commits are optimistic: when the ingest commits
between our read and our commit, pyiceberg rebases the rewrite on the new snapshot (the
files it appended stay; the files we replace must still be there, else the rewrite is
refused and nothing is lost), and `with_retry` covers a catalog locked by the other
writer. The rewrite never touches table properties, where the ingest keeps its resume
point (odradek.end-offsets) and last batch ids; its snapshot summary carries the offsets
the table covered when it was planned, marked as maintenance, so `odradek lake history`
still reads like the Kafka log it came from.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import ValidationException
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan, parquet_file_to_data_file
from pyiceberg.table import FileScanTask, Table

from odradek.pipeline.lake_catalog import SUMMARY_OFFSETS, recorded_offsets, with_retry
from odradek.pipeline.offsets import offsets_to_json

log = logging.getLogger(__name__)

SUMMARY_MAINTENANCE = "odradek.maintenance"
SUMMARY_REPLACED = "odradek.replaced-files"
DEFAULT_TARGET_BYTES = 64 * 1024 * 1024
# a file of at least this share of the target is left alone: rewriting it buys little
SMALL_SHARE = 0.75
COMMIT_ATTEMPTS = 10
# Iceberg's table properties for snapshot expiry, and its defaults (TableProperties.java)
PROP_MAX_SNAPSHOT_AGE = "history.expire.max-snapshot-age-ms"
PROP_MIN_SNAPSHOTS = "history.expire.min-snapshots-to-keep"
DEFAULT_MAX_SNAPSHOT_AGE = dt.timedelta(days=5)
DEFAULT_MIN_SNAPSHOTS = 1
# unreferenced files younger than this stay when the age comes from the table's properties:
# a running writer's Parquet files exist, unreferenced, until its commit
ORPHAN_MIN_AGE = dt.timedelta(hours=1)


class ExpiryPropertyError(ValueError):
    """A table's history.expire.* property is not a value Iceberg would take."""


@dataclass(frozen=True)
class ExpiryPolicy:
    max_age: dt.timedelta
    min_snapshots: int


def expiry_policy(table: Table) -> ExpiryPolicy:
    """The table's expiry properties (Iceberg's defaults where unset); a value that is not
    a whole number in range is a one-line error rather than a guess."""
    def number(prop: str, default: int, least: int) -> int:
        raw = table.properties.get(prop)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            value = least - 1
        if value < least:
            raise ExpiryPropertyError(f"table property {prop}={raw!r}: a whole number of at least "
                             f"{least} is expected")
        return value

    age_ms = number(PROP_MAX_SNAPSHOT_AGE, int(DEFAULT_MAX_SNAPSHOT_AGE.total_seconds() * 1000),
                    0)
    return ExpiryPolicy(dt.timedelta(milliseconds=age_ms),
                        number(PROP_MIN_SNAPSHOTS, DEFAULT_MIN_SNAPSHOTS, 1))


def set_expiry_policy(catalog: Catalog, name: str, policy: ExpiryPolicy) -> ExpiryPolicy:
    """Write the policy as the table's expiry properties; no commit when the table holds
    it already. Returns the policy the table holds afterwards."""
    wanted = {PROP_MAX_SNAPSHOT_AGE: str(int(policy.max_age.total_seconds() * 1000)),
              PROP_MIN_SNAPSHOTS: str(policy.min_snapshots)}

    def attempt() -> ExpiryPolicy:
        table = catalog.load_table(name)
        changes = {k: v for k, v in wanted.items() if table.properties.get(k) != v}
        if changes:
            table = table.transaction().set_properties(changes).commit_transaction()
        return expiry_policy(table)

    return with_retry(f"set the expiry properties of {name}", attempt)


@dataclass
class CompactionResult:
    table: str
    partitions: int = 0
    files_replaced: int = 0
    files_written: int = 0
    rows: int = 0
    snapshot_id: int | None = None
    # why a planned rewrite was not committed this time (an ingest kept committing first)
    deferred: str = ""


@dataclass
class ExpiryResult:
    table: str
    snapshots_expired: int = 0
    files_deleted: int = 0
    kept: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class TableSize:
    rows: int
    files: int
    bytes: int


def table_size(table: Table) -> TableSize:
    """Rows, data files and bytes of the current snapshot, from its summary alone."""
    snap = table.current_snapshot()
    if snap is None or snap.summary is None:
        return TableSize(0, 0, 0)
    props = snap.summary.additional_properties
    return TableSize(int(props.get("total-records", 0) or 0),
                     int(props.get("total-data-files", 0) or 0),
                     int(props.get("total-files-size", 0) or 0))


def _partition_key(task: FileScanTask) -> tuple[int, str]:
    return task.file.spec_id, repr(task.file.partition)


def plan_compaction(table: Table, target_bytes: int, min_files: int = 2
                    ) -> list[list[FileScanTask]]:
    """Per partition, its small files, when there are at least `min_files` of them."""
    snap = table.current_snapshot()
    if snap is None:
        return []
    groups: dict[tuple[int, str], list[FileScanTask]] = defaultdict(list)
    for task in table.scan(snapshot_id=snap.snapshot_id).plan_files():
        if task.delete_files:  # rows deleted by position: leave to a merge-on-read aware tool
            continue
        if task.file.file_size_in_bytes < target_bytes * SMALL_SHARE:
            groups[_partition_key(task)].append(task)
    return [g for g in groups.values() if len(g) >= min_files]


def _write_group(table: Table, tasks: list[FileScanTask], target_bytes: int) -> list[str]:
    """The group's rows (read in the current schema) as files of about the target size."""
    rows = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table(tasks)
    in_bytes = sum(t.file.file_size_in_bytes for t in tasks)
    per_file = max(1, int(rows.num_rows * target_bytes / max(in_bytes, 1)))
    base = f"{table.location().rstrip('/')}/data/compacted"
    paths = []
    for start in range(0, rows.num_rows, per_file):
        path = f"{base}/{uuid.uuid4()}.parquet"
        with table.io.new_output(path).create(overwrite=False) as stream:
            pq.write_table(rows.slice(start, per_file), stream)
        paths.append(path)
    return paths


def compact(catalog: Catalog, name: str, target_bytes: int = DEFAULT_TARGET_BYTES,
            min_files: int = 2) -> CompactionResult:
    """Rewrite each partition's small files into files of about `target_bytes`.

    The slow part (reading and writing the rows) runs against the snapshot it planned on;
    the commit is then made on the table as it is at that moment, so only an ingest commit
    landing in the few milliseconds of the commit itself makes it go round again.
    """
    result = CompactionResult(name)
    table = with_retry(f"load {name}", lambda: catalog.load_table(name))
    groups = plan_compaction(table, target_bytes, min_files)
    if not groups:
        return result
    written: list[str] = []
    committed = False
    try:
        for group in groups:
            written += _write_group(table, group, target_bytes)
        new_files = [parquet_file_to_data_file(table.io, table.metadata, p) for p in written]
        old = [t.file for g in groups for t in g]

        def attempt() -> Table:
            fresh = catalog.load_table(name)
            # the newest offsets, not the planned-on snapshot's: this snapshot becomes the
            # newest, and its summary reads as where the table stands
            summary = {SUMMARY_MAINTENANCE: "compact", SUMMARY_REPLACED: str(len(old)),
                       SUMMARY_OFFSETS: json.dumps(offsets_to_json(recorded_offsets(fresh)))}
            tx = fresh.transaction()
            with tx.update_snapshot(snapshot_properties=summary).overwrite() as rewrite:
                for f in old:
                    rewrite.delete_data_file(f)
                for f in new_files:
                    rewrite.append_data_file(f)
            return tx.commit_transaction()

        for _ in range(COMMIT_ATTEMPTS):
            try:
                done = with_retry(f"compact {name}", attempt)
                committed = True
                break
            except ValidationException as e:
                if "Missing required files" in str(e):
                    # another compaction replaced them first: nothing to do this time
                    log.info("compaction of %s skipped: %s", name, e)
                    result.deferred = "another compaction replaced the files first"
                    return result
                log.info("compaction of %s met a concurrent commit; again: %s", name, e)
        else:
            log.info("compaction of %s kept losing to concurrent commits; next time", name)
            result.deferred = "lost to concurrent commits"
            return result
    finally:
        if not committed:
            for path in written:  # never referenced by a snapshot: safe to remove
                table.io.delete(path)
    snap = done.current_snapshot()
    result.partitions = len(groups)
    result.files_replaced = len(old)
    result.files_written = len(new_files)
    result.rows = sum(f.record_count for f in new_files)
    result.snapshot_id = snap.snapshot_id if snap else None
    return result


def _reachable(table: Table) -> set[str]:
    """Every file a snapshot of `table` still needs, and its metadata files.

    Each snapshot's manifest list is read, and each distinct manifest once: appends keep
    the earlier manifests, so snapshots share most of them. After an expiry only the
    snapshots inside the retention are left, so this reads few lists.
    """
    out: set[str] = {table.metadata_location}
    out.update(entry.metadata_file for entry in table.metadata.metadata_log)
    out.update(s.statistics_path for s in table.metadata.statistics)
    out.update(s.statistics_path for s in table.metadata.partition_statistics)
    seen: set[str] = set()
    for snap in table.metadata.snapshots:
        out.add(snap.manifest_list)
        for manifest in snap.manifests(table.io):
            if manifest.manifest_path in seen:
                continue
            seen.add(manifest.manifest_path)
            out.update(e.data_file.file_path for e in
                       manifest.fetch_manifest_entry(table.io, discard_deleted=True))
    out.update(seen)
    return out


def _listing(location: str) -> tuple[pafs.FileSystem, dict[str, tuple[str, float]]]:
    """Every file under the table's location: its URI → (path in the file system,
    modification time), from one listing."""
    fs, root = pafs.FileSystem.from_uri(location)
    try:
        infos = fs.get_file_info(pafs.FileSelector(root, recursive=True))
    except FileNotFoundError:
        return fs, {}
    scheme = urlparse(location).scheme or "file"
    prefix = "file://" if scheme == "file" else f"{scheme}://"
    return fs, {prefix + i.path: (i.path, i.mtime.timestamp() if i.mtime else 0.0)
                for i in infos if i.type == pafs.FileType.File}


def _normal(path: str) -> str:
    """A path as the listing spells it (Iceberg may hold `file:/x` or a bare `/x`)."""
    if path.startswith("file://"):
        return path
    if path.startswith("file:"):
        return "file://" + path[len("file:"):]
    return "file://" + path if path.startswith("/") else path


def remove_orphans(catalog: Catalog, name: str, older_than: dt.timedelta) -> int:
    """Delete the files under the table's location that no snapshot needs and that were
    last written before `older_than` ago; returns how many.

    The age bound is what keeps a running writer safe: its Parquet files exist before the
    commit that references them, so a file younger than the retention is never touched.
    One listing of the location and one reading of the remaining snapshots: the cost
    grows with the files and the snapshots kept, not with the snapshots expired.
    """
    before = time.time() - older_than.total_seconds()
    table = catalog.load_table(name)
    fs, listed = _listing(table.location())
    # the table is read after the listing: a file committed meanwhile is seen as needed
    needed = {_normal(p) for p in _reachable(catalog.load_table(name))}
    gone = 0
    for uri, (path, mtime) in listed.items():
        if mtime < before and uri not in needed:
            with contextlib.suppress(FileNotFoundError):
                fs.delete_file(path)  # one file system object: FileIO makes one per call
            gone += 1
    return gone


def expire(catalog: Catalog, name: str, older_than: dt.timedelta | None = None,
           keep_last: int | None = None,
           orphans_older_than: dt.timedelta | None = None) -> ExpiryResult:
    """Drop snapshots older than `older_than` (always keeping the newest `keep_last`) in
    one commit, then delete the files no remaining snapshot needs (`remove_orphans`) and
    last written before `orphans_older_than` (default: `older_than`).

    Unset, `older_than` and `keep_last` are the table's `history.expire.max-snapshot-age-ms`
    and `history.expire.min-snapshots-to-keep` (Iceberg's defaults: 5 days and 1).
    """
    result = ExpiryResult(name)
    policy = expiry_policy(with_retry(f"load {name}", lambda: catalog.load_table(name)))
    older_than = policy.max_age if older_than is None else older_than
    keep_last = policy.min_snapshots if keep_last is None else keep_last
    cutoff_ms = (dt.datetime.now(dt.UTC) - older_than).timestamp() * 1000

    def attempt() -> set[int]:
        table = catalog.load_table(name)
        snaps = sorted(table.metadata.snapshots, key=lambda s: s.timestamp_ms)
        keep = snaps[-keep_last:] if keep_last > 0 else []
        # one bound for all: pyiceberg's by_ids copies the whole metadata per id, which
        # made expiry grow with the square of the snapshot count; older_than is one pass
        # and never expires a branch head (the current snapshot)
        bound_ms = min([cutoff_ms, *(s.timestamp_ms for s in keep)])
        doomed = {s.snapshot_id for s in snaps if s.timestamp_ms < bound_ms}
        if not doomed:
            return set()
        bound = dt.datetime.fromtimestamp(bound_ms / 1000, dt.UTC)
        table.maintenance.expire_snapshots().older_than(bound).commit()
        return doomed

    doomed = with_retry(f"expire snapshots of {name}", attempt)
    after = catalog.load_table(name)
    remaining = {s.snapshot_id for s in after.metadata.snapshots}
    result.snapshots_expired = len(doomed - remaining)
    result.kept = sorted(remaining)
    if doomed:
        orphan_age = older_than if orphans_older_than is None else orphans_older_than
        result.files_deleted = with_retry(f"remove unreferenced files of {name}",
                                          lambda: remove_orphans(catalog, name, orphan_age))
    return result


def maintain(catalog: Catalog, name: str, target_bytes: int = DEFAULT_TARGET_BYTES,
             retention: dt.timedelta | None = None
             ) -> tuple[CompactionResult, ExpiryResult, TableSize]:
    """Compact, then expire: what `odradek lake maintain` runs.

    Without a `retention` the expiry follows the table's own properties, as `expire()`
    does (history.expire.max-snapshot-age-ms, default 5 days), and unreferenced files go
    once they are that old and at least `ORPHAN_MIN_AGE`: a short age written on the table
    (`odradek up` writes 120 s) must not reach a running ingest's uncommitted files. A
    given `retention` is the bound for both, as the operator asked.
    """
    orphans = None
    if retention is None:
        table = with_retry(f"load {name}", lambda: catalog.load_table(name))
        orphans = max(expiry_policy(table).max_age, ORPHAN_MIN_AGE)
    compacted = compact(catalog, name, target_bytes)
    expired = expire(catalog, name, retention, orphans_older_than=orphans)
    return compacted, expired, table_size(catalog.load_table(name))


def describe_result(c: CompactionResult, e: ExpiryResult, size: TableSize) -> dict[str, Any]:
    return {"table": c.table, "partitions_compacted": c.partitions,
            "files_replaced": c.files_replaced, "files_written": c.files_written,
            "rows_rewritten": c.rows, "snapshots_expired": e.snapshots_expired,
            "files_deleted": e.files_deleted, "rows": size.rows, "files": size.files,
            "bytes": size.bytes}

