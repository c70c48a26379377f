"""Ad-hoc SQL over lake tables: DuckDB on pyiceberg scans, with time travel.

The tables a query names (`iot.events`, or `events` for `default.events`) are read through
pyiceberg at the snapshot asked for and handed to DuckDB as Arrow; DuckDB runs the SQL.
Time travel picks, per table, the snapshot by id, the one current at a timestamp, or the
first one that holds a given Kafka record (`topic:partition:offset`), read from the
offsets each snapshot's summary records (`odradek.end-offsets`, the next offset to read).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from odradek.pipeline.lake_catalog import SUMMARY_OFFSETS
from odradek.pipeline.offsets import offsets_from_json


class QueryError(Exception):
    """A query that cannot run; the message is one line for the user."""


@dataclass(frozen=True)
class AsOfOffset:
    topic: str
    partition: int
    offset: int

    @classmethod
    def parse(cls, text: str) -> AsOfOffset:
        topic, sep, rest = text.rpartition(":")
        topic2, sep2, partition = topic.rpartition(":")
        if not sep or not sep2 or not topic2:
            raise QueryError(f"--as-of-offset {text}: give TOPIC:PARTITION:OFFSET")
        try:
            return cls(topic2, int(partition), int(rest))
        except ValueError:
            raise QueryError(f"--as-of-offset {text}: partition and offset are integers"
                             ) from None


@dataclass(frozen=True)
class TimeTravel:
    snapshot_id: int | None = None
    as_of: dt.datetime | None = None
    as_of_offset: AsOfOffset | None = None


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    snapshots: dict[str, int | None]  # table → the snapshot read (None: empty table)

    def as_dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def referenced_tables(sql: str) -> list[str]:
    """The tables the SQL reads, as `namespace.name` (an unqualified name is in default)."""
    import duckdb

    try:
        names = duckdb.get_table_names(sql, qualified=True)
    except duckdb.Error as e:
        raise QueryError(f"bad SQL: {_first_line(e)}") from None
    out = []
    for name in names:
        bare = re.split(r"\s+AS\s+", name, maxsplit=1, flags=re.IGNORECASE)[0]
        parts = [p.strip().strip('"') for p in bare.split(".")]
        out.append(".".join(parts[-2:]) if len(parts) > 1 else f"default.{parts[0]}")
    return sorted(set(out))


def _offsets_of(snap: Snapshot) -> dict[tuple[str, int], int]:
    raw = snap.summary.additional_properties.get(SUMMARY_OFFSETS) if snap.summary else None
    return offsets_from_json(json.loads(raw)) if raw else {}


def snapshot_holding(table: Table, name: str, where: AsOfOffset) -> Snapshot:
    """The oldest snapshot of the table that holds the record at `where`: the first whose
    recorded offsets (merged over the snapshots before it) go past it."""
    seen: dict[tuple[str, int], int] = {}
    tp = (where.topic, where.partition)
    for snap in sorted(table.metadata.snapshots, key=lambda s: s.timestamp_ms):
        seen.update(_offsets_of(snap))
        if seen.get(tp, -1) > where.offset:
            return snap
    if tp not in seen:
        raise QueryError(f"{name} holds no records of {where.topic} partition "
                         f"{where.partition}")
    raise QueryError(f"{name} does not hold {where.topic}:{where.partition}:{where.offset} "
                     f"yet (it holds up to offset {seen[tp] - 1})")


def pick_snapshot(table: Table, name: str, travel: TimeTravel) -> Snapshot | None:
    if travel.snapshot_id is not None:
        snap = table.snapshot_by_id(travel.snapshot_id)
        if snap is None:
            raise QueryError(f"{name} has no snapshot {travel.snapshot_id}: "
                             f"odradek lake history {name} lists them")
        return snap
    if travel.as_of is not None:
        ms = int(travel.as_of.timestamp() * 1000)
        snap = table.snapshot_as_of_timestamp(ms)
        if snap is None:
            raise QueryError(f"{name} had no snapshot yet at {travel.as_of.isoformat()}")
        return snap
    if travel.as_of_offset is not None:
        return snapshot_holding(table, name, travel.as_of_offset)
    return table.current_snapshot()


def _load(catalog: Catalog, name: str) -> Table:
    try:
        return catalog.load_table(name)
    except (NoSuchTableError, NoSuchNamespaceError):
        raise QueryError(f"no table {name} in {catalog.properties.get('uri', 'the catalog')}: "
                         "odradek lake tables lists the tables there") from None


def run_query(catalog: Catalog, sql: str, travel: TimeTravel = TimeTravel()) -> QueryResult:
    import duckdb

    names = referenced_tables(sql)
    tables = {name: _load(catalog, name) for name in names}
    if travel.snapshot_id is not None:
        # a snapshot id belongs to one table; the others are read as they are now
        owners = [n for n, t in tables.items() if t.snapshot_by_id(travel.snapshot_id)]
        if not owners:
            raise QueryError(f"no table in the query has snapshot {travel.snapshot_id}")
    con = duckdb.connect()
    snapshots: dict[str, int | None] = {}
    try:
        for n, (name, table) in enumerate(tables.items()):
            own = travel
            if travel.snapshot_id is not None and table.snapshot_by_id(travel.snapshot_id) is None:
                own = TimeTravel()
            snap = pick_snapshot(table, name, own)
            snapshots[name] = snap.snapshot_id if snap else None
            arrow = (table.scan(snapshot_id=snap.snapshot_id).to_arrow() if snap is not None
                     else pa.schema(table.schema().as_arrow()).empty_table())
            namespace, short = name.rsplit(".", 1)
            view = f"__lake_{n}"
            con.register(view, arrow)
            con.execute(f'CREATE SCHEMA IF NOT EXISTS "{namespace}"')
            con.execute(f'CREATE VIEW "{namespace}"."{short}" AS SELECT * FROM {view}')
            if namespace == "default":  # DuckDB's own schema is main: `events` finds it too
                con.execute(f'CREATE VIEW "{short}" AS SELECT * FROM {view}')
        try:
            cursor = con.execute(sql)
            columns = [d[0] for d in cursor.description or []]
            rows = cursor.fetchall()
        except duckdb.Error as e:
            raise QueryError(f"bad SQL: {_first_line(e)}") from None
    finally:
        con.close()
    return QueryResult(columns, rows, snapshots)
