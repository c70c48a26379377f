"""What `odradek lake tables | describe | history | search` show, as plain data.

Everything is read from the catalog and Iceberg metadata (no data files are scanned but
the partition summary's): schemas and their history, partitions, row counts, freshness,
the Kafka offsets each snapshot covers, and the type conflicts the ingest met.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyiceberg.types import ListType, MapType, NestedField, StructType

from odradek.home import Home
from odradek.pipeline.lake_catalog import (
    PROP_KIND,
    SUMMARY_BATCH,
    SUMMARY_OFFSETS,
    SUMMARY_QUARANTINED,
    SUMMARY_QUERY,
    SUMMARY_START,
    LakeConfig,
    conflicts,
    open_catalog,
    recorded_offsets,
)
from odradek.pipeline.offsets import offsets_to_json


class LakeNotFoundError(LookupError):
    """No catalog where a read-only command looked; the message says where and what to do."""


def _sqlite_path(uri: str) -> Path | None:
    prefix = "sqlite:///"
    return Path(uri[len(prefix):]) if uri.startswith(prefix) else None


def open_existing(home: Home, catalog_uri: str | None = None,
                  warehouse: str | None = None) -> Catalog:
    """The lake's catalog for reading: never creates a catalog file or a folder.

    SQLite would make an empty database at any path it is given, and a browsing command
    would then answer with an empty list instead of saying it looked in the wrong place.
    """
    uri = catalog_uri or f"sqlite:///{home.catalog_db}"
    path = _sqlite_path(uri)
    if path is not None and not path.is_file():
        if catalog_uri is not None:
            raise LakeNotFoundError(f"no catalog at {path}: check --catalog-uri")
        message = home.missing("lake catalog", path)
        if (old := home.root / "pipeline" / "lake" / "catalog.db").is_file():
            message += (f"; an earlier odradek up left its lake in {old.parent}: "
                        f"--catalog-uri sqlite:///{old}")
        raise LakeNotFoundError(message)
    wh = warehouse or home.warehouse.as_uri()
    if "://" not in wh:
        wh = Path(wh).absolute().as_uri()
    return open_catalog(LakeConfig(uri, wh))


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _columns(fields: tuple[NestedField, ...] | list[NestedField], prefix: str = ""
             ) -> list[tuple[str, str, str]]:
    """(dotted path, type, doc) of every column, nested ones included."""
    out: list[tuple[str, str, str]] = []
    for f in fields:
        path = prefix + f.name
        out.append((path, str(f.field_type), f.doc or ""))
        t = f.field_type
        if isinstance(t, StructType):
            out += _columns(t.fields, path + ".")
        elif isinstance(t, ListType) and isinstance(t.element_type, StructType):
            out += _columns(t.element_type.fields, path + "[].")
        elif isinstance(t, MapType) and isinstance(t.value_type, StructType):
            out += _columns(t.value_type.fields, path + "{}.")
    return out


def all_tables(catalog: Catalog) -> list[str]:
    names = []
    for ns in catalog.list_namespaces():
        for ident in catalog.list_tables(ns):
            names.append(".".join(ident))
    return sorted(names)


@dataclass
class TableSummary:
    name: str
    kind: str
    rows: int
    files: int
    columns: int
    last_commit: str
    conflicts: int


def _total(table: Table, key: str) -> int:
    snap = table.current_snapshot()
    if snap is None or snap.summary is None:
        return 0
    return int(snap.summary.additional_properties.get(key, "0") or 0)


def summarize(catalog: Catalog, name: str) -> TableSummary:
    table = catalog.load_table(name)
    snap = table.current_snapshot()
    return TableSummary(
        name=name, kind=table.properties.get(PROP_KIND, "table"),
        rows=_total(table, "total-records"), files=_total(table, "total-data-files"),
        columns=len(_columns(table.schema().fields)),
        last_commit=_when(snap.timestamp_ms if snap else None),
        conflicts=len(conflicts(table)))


@dataclass
class TableDescription:
    name: str
    location: str
    rows: int
    files: int
    last_commit: str
    newest_event: str
    columns: list[tuple[str, str, str]]
    partition_spec: list[str]
    partitions: list[dict[str, Any]]
    schema_history: list[dict[str, Any]]
    offsets: dict[str, dict[str, int]]
    conflicts: list[dict[str, Any]]
    properties: dict[str, str] = field(default_factory=dict)


def describe(catalog: Catalog, name: str) -> TableDescription:
    table = catalog.load_table(name)
    schema = table.schema()
    snap = table.current_snapshot()
    spec = [f"{f.name} = {f.transform}({schema.find_column_name(f.source_id)})"
            for f in table.spec().fields]
    partitions: list[dict[str, Any]] = []
    newest_ms: int | None = None
    if snap is not None:
        for row in table.inspect.partitions().to_pylist():
            part = row.get("partition") or {}
            when = row.get("last_updated_at")
            partitions.append({
                "partition": ", ".join(f"{k}={v}" for k, v in part.items()),
                "rows": row.get("record_count", 0), "files": row.get("file_count", 0),
                "last_updated": when.strftime("%Y-%m-%d %H:%M:%S") if when else "-"})
        if schema.find_field("_timestamp", case_sensitive=True) is not None:
            # Freshness: the newest event time, from the files' column statistics only.
            for row in table.inspect.files().to_pylist():
                bounds = row.get("readable_metrics", {}).get("_timestamp") or {}
                upper = bounds.get("upper_bound")
                if upper is not None:
                    ms = int(upper.timestamp() * 1000)
                    newest_ms = ms if newest_ms is None else max(newest_ms, ms)
    history = []
    previous: set[str] = set()
    for s in sorted(table.schemas().values(), key=lambda s: s.schema_id):
        names = {path for path, _, _ in _columns(s.fields)}
        history.append({"schema_id": s.schema_id, "columns": len(names),
                        "added": sorted(names - previous) if previous else [],
                        "removed": sorted(previous - names)})
        previous = names
    return TableDescription(
        name=name, location=table.location(), rows=_total(table, "total-records"),
        files=_total(table, "total-data-files"),
        last_commit=_when(snap.timestamp_ms if snap else None), newest_event=_when(newest_ms),
        columns=_columns(schema.fields), partition_spec=spec, partitions=partitions,
        schema_history=history, offsets=offsets_to_json(recorded_offsets(table)),
        conflicts=conflicts(table), properties=dict(table.properties))


def history(catalog: Catalog, name: str) -> list[dict[str, Any]]:
    """Snapshots oldest first, each with the Kafka offsets it covers."""
    table = catalog.load_table(name)
    out = []
    for snap in sorted(table.metadata.snapshots, key=lambda s: s.timestamp_ms):
        props = dict(snap.summary.additional_properties) if snap.summary else {}
        op = snap.summary.operation.value if snap.summary else "?"
        out.append({
            "snapshot_id": snap.snapshot_id, "committed": _when(snap.timestamp_ms),
            "operation": op, "schema_id": snap.schema_id,
            "added_rows": int(props.get("added-records", "0") or 0),
            "quarantined": int(props.get(SUMMARY_QUARANTINED, "0") or 0),
            "query_id": props.get(SUMMARY_QUERY, ""), "batch_id": props.get(SUMMARY_BATCH, ""),
            "start_offsets": json.loads(props[SUMMARY_START]) if SUMMARY_START in props else None,
            "end_offsets": json.loads(props[SUMMARY_OFFSETS]) if SUMMARY_OFFSETS in props
            else None,
        })
    return out


def search(catalog: Catalog, term: str) -> list[dict[str, str]]:
    """Tables and columns whose name (or doc, or conflict record) contains the term."""
    needle = term.lower()
    hits = []
    for name in all_tables(catalog):
        table = catalog.load_table(name)
        if needle in name.lower():
            hits.append({"table": name, "match": "table", "what": name, "type": ""})
        for path, type_, doc in _columns(table.schema().fields):
            if needle in path.lower() or (doc and needle in doc.lower()):
                hits.append({"table": name, "match": "column", "what": path, "type": type_})
        for c in conflicts(table):
            if needle in str(c.get("column", "")).lower():
                hits.append({"table": name, "match": "conflict", "what": c["column"],
                             "type": f"{c.get('table_type')} vs {c.get('seen_type')}"})
    return hits
