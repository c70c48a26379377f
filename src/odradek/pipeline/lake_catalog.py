"""The lake's catalog: Iceberg tables in a SQL catalog (SQLite file by default).

Holds the table layout the ingest job writes (Kafka coordinates as `_`-columns, partitioned
by topic and event day), and the bookkeeping a rerun needs, read back from Iceberg itself:
the offsets each snapshot covers, the last batch each streaming query committed, and the
type conflicts met so far.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import DayTransform, IdentityTransform
from pyiceberg.types import (
    BinaryType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestamptzType,
)
from sqlalchemy.exc import IntegrityError

from odradek.pipeline.offsets import Offsets, offsets_from_json

log = logging.getLogger(__name__)

QUARANTINE_SUFFIX = "__quarantine"
META_COLUMNS = ("_topic", "_partition", "_offset", "_timestamp", "_key")

# Snapshot summary keys (strings: Iceberg summaries hold strings only).
SUMMARY_QUERY = "odradek.query-id"
SUMMARY_BATCH = "odradek.batch-id"
SUMMARY_OFFSETS = "odradek.end-offsets"
SUMMARY_START = "odradek.start-offsets"
SUMMARY_ROWS = "odradek.rows"
SUMMARY_QUARANTINED = "odradek.quarantined"
PROP_LAST_BATCH = "odradek.last-batch."  # + query id
PROP_CONFLICTS = "odradek.conflicts"
PROP_KIND = "odradek.kind"
PROP_OFFSETS = "odradek.end-offsets"  # merged over every writer: the table's resume point
# pyiceberg retries a commit that lost a race by re-applying the same updates on the new
# metadata: property values merged from the old one (PROP_OFFSETS, PROP_CONFLICTS) would
# overwrite the winner's. Its retries are off on our tables; with_retry() recomputes.
NO_ICEBERG_RETRIES = {"commit.retry.num-retries": "0"}

T = TypeVar("T")


class CatalogBusyError(RuntimeError):
    """Another writer held the catalog (or kept winning the commit race) for too long."""


@dataclass(frozen=True)
class LakeConfig:
    catalog_uri: str
    warehouse: str
    catalog_name: str = "odradek"

    @staticmethod
    def local(data_dir: Path) -> LakeConfig:
        """The embedded default: a SQLite catalog and a warehouse folder under data_dir."""
        data_dir = data_dir.resolve()
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / "warehouse").mkdir(exist_ok=True)
        return LakeConfig(f"sqlite:///{data_dir / 'catalog.db'}",
                          (data_dir / "warehouse").as_uri())

    @staticmethod
    def resolve(data_dir: Path, catalog_uri: str | None, warehouse: str | None) -> LakeConfig:
        default = LakeConfig.local(data_dir)
        wh = warehouse or default.warehouse
        if "://" not in wh:
            Path(wh).mkdir(parents=True, exist_ok=True)
            wh = Path(wh).resolve().as_uri()
        return LakeConfig(catalog_uri or default.catalog_uri, wh)


def open_catalog(config: LakeConfig) -> Catalog:
    # SQLite makes a writer wait up to 5 s for another's lock before "database is locked";
    # with_retry() then retries, so a busy catalog slows a commit down but does not fail it.
    return SqlCatalog(config.catalog_name, uri=config.catalog_uri, warehouse=config.warehouse)


def _base_fields(quarantine: bool) -> list[NestedField]:
    fields = [
        NestedField(1, "_topic", StringType(), required=False),
        NestedField(2, "_partition", IntegerType(), required=False),
        NestedField(3, "_offset", LongType(), required=False),
        NestedField(4, "_timestamp", TimestamptzType(), required=False,
                    doc="the Kafka record's timestamp: event time for CreateTime topics"),
        NestedField(5, "_key", StringType(), required=False),
    ]
    if quarantine:
        fields += [
            NestedField(6, "raw", BinaryType(), required=False, doc="the record's value bytes"),
            NestedField(7, "error", StringType(), required=False, doc="why it was refused"),
        ]
    return fields


_SPEC = PartitionSpec(
    PartitionField(source_id=1, field_id=1000, transform=IdentityTransform(), name="_topic"),
    PartitionField(source_id=4, field_id=1001, transform=DayTransform(), name="_day"),
)


def split_identifier(identifier: str) -> tuple[str, str]:
    if "." not in identifier:
        return "default", identifier
    namespace, name = identifier.rsplit(".", 1)
    return namespace, name


def ensure_table(catalog: Catalog, identifier: str, quarantine: bool = False) -> Table:
    """Load the table, creating it (and its namespace) with the lake layout when missing."""
    namespace, _ = split_identifier(identifier)
    full = identifier if "." in identifier else f"default.{identifier}"
    try:
        return catalog.load_table(full)
    except NoSuchTableError:
        pass
    # two writers starting at once race to create them: on a SQL catalog the loser gets
    # the database's unique-key error rather than pyiceberg's own
    with contextlib.suppress(NamespaceAlreadyExistsError, IntegrityError):
        catalog.create_namespace(namespace)
    schema = Schema(*_base_fields(quarantine))
    props = {PROP_KIND: "quarantine" if quarantine else "events", **NO_ICEBERG_RETRIES,
             "schema.name-mapping.default": schema.name_mapping.model_dump_json()}
    try:
        return catalog.create_table(full, schema=schema, partition_spec=_SPEC, properties=props)
    except (TableAlreadyExistsError, IntegrityError):
        return catalog.load_table(full)


def quarantine_identifier(identifier: str) -> str:
    return identifier + QUARANTINE_SUFFIX


def with_retry(what: str, attempt: Callable[[], T], budget_s: float = 60.0) -> T:
    """Retry a catalog commit that lost a race or found the catalog locked.

    Iceberg commits are optimistic: a writer that lost reloads and tries again. A SQLite
    catalog held by another process answers "database is locked"; past the budget the
    error says who to look for instead of hanging.
    """
    deadline = time.monotonic() + budget_s
    delay = 0.05
    while True:
        try:
            return attempt()
        except CommitFailedException as e:
            reason = f"lost a concurrent commit ({e})"
        except Exception as e:
            text = str(e)
            if "locked" not in text and "busy" not in text.lower():
                raise
            reason = "the catalog database is locked by another writer"
        if time.monotonic() > deadline:
            raise CatalogBusyError(
                f"{what}: {reason}; gave up after {budget_s:.0f}s. Another process is "
                "writing the same catalog: with several writers use a PostgreSQL catalog "
                "(--catalog-uri postgresql+psycopg://…).")
        log.info("%s: %s; retrying", what, reason)
        time.sleep(delay)
        delay = min(delay * 2, 2.0)


def summaries(table: Table) -> list[tuple[Any, dict[str, str]]]:
    """(snapshot, summary properties) newest first."""
    snaps = sorted(table.metadata.snapshots, key=lambda s: s.timestamp_ms, reverse=True)
    return [(s, dict(s.summary.additional_properties) if s.summary else {}) for s in snaps]


def recorded_offsets(table: Table) -> Offsets:
    """The next offset to read per partition, as the table's own snapshots record it.

    Newest snapshot first, so each partition gets the offset of the last batch that
    covered it, even when several queries (topics) write the same table.
    """
    raw_prop = table.properties.get(PROP_OFFSETS)
    if raw_prop:
        return offsets_from_json(json.loads(raw_prop))
    result: Offsets = {}
    for _, props in summaries(table):
        raw = props.get(SUMMARY_OFFSETS)
        if not raw:
            continue
        for tp, offset in offsets_from_json(json.loads(raw)).items():
            result.setdefault(tp, offset)
    return result


def last_batch(table: Table, query_id: str) -> int | None:
    raw = table.properties.get(PROP_LAST_BATCH + query_id)
    return int(raw) if raw is not None else None


def conflicts(table: Table) -> list[dict[str, Any]]:
    raw = table.properties.get(PROP_CONFLICTS)
    return list(json.loads(raw)) if raw else []
