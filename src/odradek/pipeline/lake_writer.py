"""One micro-batch into the lake: parse, infer, merge the schema, write, commit once.

Spark writes the Parquet files (distributed; nothing is collected to the driver); the
driver then registers them in one Iceberg transaction that also evolves the schema and
records the batch (query id, batch id, end offsets). A batch the table already holds is
recognised by that record and skipped, so a replay after a crash never writes twice.

For a table that has columns the batch is read, parsed, inferred and written in one pass:
rows are loaded as the table expects while the write's observation infers the schema;
only a batch that brings something new is written again with its own plan (_one_pass).
A new table's first batch, and registry-decoded batches (their types come from the
registry by schema id), are inferred first, then written.

Before any of that, a JSON batch (arrow_lane) or a batch of registry-framed Avro values
(lane_avro) goes through the Arrow lane: the Spark tasks decode and write the Parquet
themselves and the driver commits; a batch the lane cannot land exactly as the Spark path
would takes the Spark path.

Records that are not JSON objects (or do not decode) are split off in the inference pass
itself: the aggregate that infers the schema also collects them, and the driver appends
them to the quarantine table with pyarrow. A batch without one runs no quarantine job and
makes no quarantine commit; only a batch with very many (or very large) bad records
writes them with Spark, in a pass of their own (`quarantine_collect_rows`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from odradek.pipeline.arrow_lane import (
    INPUT_COLUMNS,
    OUT_SCHEMA,
    Fallback,
    LaneSpec,
    batch_type,
    conform,
    lane_type,
    run_ranges,
    run_task,
)
from odradek.pipeline.avro_values import ValueDecoder
from odradek.pipeline.jsontypes import (
    STRUCT,
    JType,
    from_arrow,
    json_error,
    parse_variant_schema,
    prune,
    to_arrow,
)
from odradek.pipeline.lake_catalog import (
    META_COLUMNS,
    NO_ICEBERG_RETRIES,
    PROP_CONFLICTS,
    PROP_LAST_BATCH,
    PROP_OFFSETS,
    SUMMARY_BATCH,
    SUMMARY_OFFSETS,
    SUMMARY_QUARANTINED,
    SUMMARY_QUERY,
    SUMMARY_ROWS,
    SUMMARY_START,
    LakeConfig,
    conflicts,
    ensure_table,
    last_batch,
    open_catalog,
    quarantine_identifier,
    with_retry,
)
from odradek.pipeline.lane_avro import RegistryTask, lane_ids, narrower, registry_plan
from odradek.pipeline.offsets import offsets_to_json
from odradek.pipeline.options import SourceOptions
from odradek.pipeline.range_reader import (
    SPARK_SCHEMA,
    SPARK_SCHEMA_WITH_HEADERS,
    read_ranges,
)
from odradek.pipeline.registry_values import FramedDecoder
from odradek.pipeline.schema_merge import (
    Conflict,
    MergePlan,
    covers,
    expected_plan,
    load_expressions,
    plan_merge,
    struct_loads,
)

log = logging.getLogger(__name__)

_STATUS = """CASE
  WHEN _raw IS NULL THEN 'empty'
  WHEN _decode_error IS NOT NULL OR v IS NULL THEN 'malformed'
  WHEN startswith({text}, '{{') THEN 'ok'
  WHEN left(ltrim(translate(substring({text}, 1, 64), '\\t\\n\\r', '   ')), 1)
       <> '{{' THEN 'not-object'
  ELSE 'ok' END"""
_BAD = "_status IN ('malformed', 'not-object')"
# A bad record's coordinates, value and (for registry/Avro values) decoding error, as the
# inference aggregate collects it; the timestamp in microseconds, Iceberg's own unit.
_QUARANTINE_ROW = ("named_struct('topic', _topic, 'partition', _partition, 'offset', _offset,"
                   " 'ts', unix_micros(_timestamp), 'key', _key, 'raw', _raw,"
                   " 'error', _decode_error)")
_QUARANTINE_ARROW = pa.schema([
    pa.field("_topic", pa.string()), pa.field("_partition", pa.int32()),
    pa.field("_offset", pa.int64()), pa.field("_timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("_key", pa.string()), pa.field("raw", pa.binary()),
    pa.field("error", pa.string())])


@dataclass
class BatchResult:
    batch_id: int
    rows: int = 0
    quarantined: int = 0
    files: int = 0
    skipped: bool = False
    evolved: bool = False
    conflicts: list[Conflict] = field(default_factory=list)
    end_offsets: dict[str, dict[str, int]] | None = None
    timings: dict[str, float] = field(default_factory=dict)


def checkpoint_query_id(checkpoint: Path) -> str | None:
    try:
        return str(json.loads((checkpoint / "metadata").read_text())["id"])
    except (FileNotFoundError, KeyError, json.JSONDecodeError):
        return None


def checkpoint_offsets(checkpoint: Path, batch_id: int) -> dict[str, dict[str, int]] | None:
    """The source's end offsets for a batch, from Spark's offset log (written before the run).

    The file is `v1`, a metadata line, then one line per source; the ingest query has one.
    """
    try:
        lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
    except FileNotFoundError:
        return None
    if len(lines) < 3 or not lines[2].strip().startswith("{"):
        return None
    return dict(json.loads(lines[2]))


def _list_parquet(uri: str) -> list[str]:
    fs, path = pafs.FileSystem.from_uri(uri)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, recursive=True))
    except FileNotFoundError:
        return []
    scheme = urlparse(uri).scheme or "file"
    prefix = "file://" if scheme == "file" else f"{scheme}://"
    return sorted(prefix + i.path for i in infos
                  if i.type == pafs.FileType.File and i.path.endswith(".parquet"))


def _remove(uri: str) -> None:
    fs, path = pafs.FileSystem.from_uri(uri)
    with contextlib.suppress(FileNotFoundError):
        fs.delete_dir(path)


def _data_type(table: Table) -> JType:
    arrow = table.schema().as_arrow()
    return JType(STRUCT, tuple((f.name, from_arrow(f.type)) for f in arrow
                               if f.name not in META_COLUMNS))


def _merged_conflicts(table: Table, new: list[Conflict], batch_id: int, query_id: str,
                      offsets: dict[str, dict[str, int]] | None) -> str | None:
    known = conflicts(table)
    seen = {(c["column"], c["seen_type"]) for c in known}
    added = False
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    for c in new:
        if (c.column, c.seen_type) in seen:
            continue
        known.append({**c.as_dict(), "first_batch": batch_id, "query_id": query_id,
                      "first_seen": now, "offsets": offsets or {}})
        seen.add((c.column, c.seen_type))
        added = True
    return json.dumps(known) if added else None


class LakeWriter:
    """`foreachBatch` target: lands each micro-batch of Kafka records in an Iceberg table."""

    # Bad records a batch may have for the driver to quarantine them from the inference
    # pass (each value at most quarantine_collect_bytes); more, and Spark writes them in
    # a pass of their own. Bounds what the driver receives: 10,000 x 64 KiB at worst.
    # (The aggregate's buffer holds a batch's small bad records before the slice: no more
    # than the batch itself, which Spark holds persisted already.)
    quarantine_collect_rows = 10_000
    quarantine_collect_bytes = 64 * 1024
    # Load a batch for a table that has columns in one pass (see _one_pass); False: infer
    # first, then load, as every batch did before (bench.pipeline_lake --compare).
    one_pass = True
    # Parse and write a JSON batch (arrow_lane) or decode a registry-framed Avro one
    # (lane_avro) in the Spark tasks with pyarrow; a batch the lane cannot land exactly as
    # the Spark path would takes the Spark path.
    arrow_lane = True

    def __init__(self, config: LakeConfig, table: str, checkpoint: Path | None = None,
                 query_id: str | None = None,
                 on_batch: Callable[[BatchResult], None] | None = None,
                 avro: ValueDecoder | None = None,
                 source: SourceOptions | None = None) -> None:
        self.config = config
        # How to read the records when the batch holds offset ranges (`rangesOnly`).
        self.source = source
        self.table_name = table if "." in table else f"default.{table}"
        self.checkpoint = checkpoint
        self._query_id = query_id
        self.on_batch = on_batch
        self.avro = avro
        self._catalog: Catalog | None = None
        # The last batch's plan: how the next one is expected to load.
        self._last_plan: MergePlan | None = None

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = open_catalog(self.config)
        return self._catalog

    def query_id(self) -> str:
        if self._query_id is None and self.checkpoint is not None:
            self._query_id = checkpoint_query_id(self.checkpoint)
        return self._query_id or "batch"

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        result = self.write_batch(df, batch_id)
        if self.on_batch is not None:
            self.on_batch(result)

    def _end_offsets(self, parsed: DataFrame, batch_id: int) -> dict[str, dict[str, int]]:
        if self.checkpoint is not None:
            recorded = checkpoint_offsets(self.checkpoint, batch_id)
            if recorded is not None:
                return recorded
        rows = parsed.groupBy("_topic", "_partition").agg(F.max("_offset").alias("m")).collect()
        return offsets_to_json({(r["_topic"], r["_partition"]): r["m"] + 1 for r in rows})

    def write_batch(self, df: DataFrame, batch_id: int) -> BatchResult:
        query_id = self.query_id()
        result = BatchResult(batch_id)
        table = with_retry("open table", lambda: ensure_table(self.catalog, self.table_name))
        done = last_batch(table, query_id)
        if done is not None and done >= batch_id:
            log.info("batch %d of query %s is already in %s; skipping the replay",
                     batch_id, query_id, self.table_name)
            result.skipped = True
            return result

        clock = time.perf_counter()

        def lap(name: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            result.timings[name] = result.timings.get(name, 0.0) + now - clock
            clock = now

        current = _data_type(table)
        ranges = "startOffset" in df.columns
        registry = isinstance(self.avro, FramedDecoder)
        if self.arrow_lane and (registry or (self.avro is None and lane_type(current))):
            landed = self._lane(df, table, current, batch_id, query_id, result, lap)
            if landed is not None:
                return landed
        parsed = self._parse(self._records(df) if ranges else df)
        if (self.one_pass and current.fields
                and getattr(self.avro, "declared_type", None) is None):
            return self._one_pass(parsed, table, current, batch_id, query_id, result, lap)
        parsed.persist(StorageLevel.MEMORY_AND_DISK_DESER)
        try:
            stats = parsed.agg(*self._stats()).collect()[0]
            lap("infer")
            if int(stats["n"]) == 0:
                return result
            end_offsets = self._end_offsets(parsed, batch_id)
            plan = plan_merge(current, self._declared(parsed)
                              or prune(parse_variant_schema(stats["s"])))
            good = self._land_bad(parsed, stats, plan, batch_id, query_id, end_offsets,
                                  result, lap)
            base = self._data_path(table, query_id, batch_id)
            files: list[str] = []
            if good:
                self._write_rows(parsed, load_expressions(plan), base)
                files = _list_parquet(base)
                lap("write")
            self._commit(plan, files, batch_id, query_id, end_offsets, good, result.quarantined)
            lap("commit")
            self._last_plan = plan
            result.rows, result.files = good, len(files)
            return result
        finally:
            parsed.unpersist()

    def _lane(self, df: DataFrame, table: Table, current: JType, batch_id: int,
              query_id: str, result: BatchResult,
              lap: Callable[[str], None]) -> BatchResult | None:
        """The batch through the Arrow lane; None: it needs the Spark path (nothing of it
        was committed, and its files are gone)."""
        base = self._data_path(table, query_id, batch_id)
        _remove(base)  # an earlier attempt's files
        registry = self.avro if isinstance(self.avro, FramedDecoder) else None
        spec = LaneSpec(base, current, max(int(self.quarantine_collect_rows), 0),
                        int(self.quarantine_collect_bytes), avro=registry,
                        task=RegistryTask if registry is not None else None)
        if "startOffset" in df.columns:  # offset ranges: the tasks read the records
            tasks = df.mapInArrow(functools.partial(run_ranges, spec, self._source()),
                                  OUT_SCHEMA)
        else:
            tasks = df.select(*INPUT_COLUMNS).mapInArrow(functools.partial(run_task, spec),
                                                         OUT_SCHEMA)
        answers = tasks.collect()
        lap("lane")
        reasons = [a["error"] for a in answers if a["kind"] == "fallback"]
        files = [a for a in answers if a["kind"] == "file"]
        bad = [a.asDict() for a in answers if a["kind"] == "bad"]
        good = sum(int(a["rows"]) for a in files)
        if len(bad) > self.quarantine_collect_rows:  # each task kept within it; all together not
            reasons.append("more bad records than the driver collects")
        plan: MergePlan | None = None
        if not reasons:
            schemas = [pa.ipc.read_schema(pa.py_buffer(a["arrow_schema"])) for a in files]
            try:
                plan = (plan_merge(current, batch_type(schemas, current)) if registry is None
                        else registry_plan(registry, current, lane_ids(answers)))
            except Fallback as e:
                reasons.append(str(e))
            if plan is not None and plan.conflicts:
                reasons.append(f"a conflict on {plan.conflicts[0].column}")
            if plan is not None and registry is not None:
                reasons += narrower(schemas, plan)
        paths: list[str] = []
        if not reasons and plan is not None:
            try:
                paths = [conform(a["path"], s, plan.table)
                         for a, s in zip(files, schemas, strict=True)]
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                # a safe cast refuses an integer a float column does not hold exactly
                reasons.append(f"a lane file is not cast exactly into the plan's: {e}")
        if reasons or plan is None:
            _remove(base)
            log.info("batch %d of %s takes the Spark path: %s", batch_id, self.table_name,
                     reasons[0] if reasons else "no plan")
            return None
        if good + len(bad) == 0:
            _remove(base)
            return result
        end_offsets = (checkpoint_offsets(self.checkpoint, batch_id)
                       if self.checkpoint is not None else None)
        if end_offsets is None:
            end_offsets = offsets_to_json({(a["topic"], a["partition"]): int(a["offset"]) + 1
                                           for a in answers if a["kind"] == "end"})
        stats = {"n": good + len(bad), "bad": len(bad), "q": bad}
        self._land_bad(df, stats, plan, batch_id, query_id, end_offsets, result, lap)
        self._commit(plan, paths, batch_id, query_id, end_offsets, good, result.quarantined)
        lap("commit")
        self._last_plan = plan
        result.rows, result.files = good, len(paths)
        return result

    def _source(self) -> SourceOptions:
        if self.source is None:
            raise ValueError("a batch of offset ranges needs the source's options")
        return self.source

    def _records(self, ranges: DataFrame) -> DataFrame:
        """The records of a batch of offset ranges, read in its tasks, as the source
        would have given them (for the Spark path)."""
        source = self._source()
        schema = SPARK_SCHEMA_WITH_HEADERS if source.include_headers else SPARK_SCHEMA
        return ranges.mapInArrow(functools.partial(read_ranges, source), schema)


    def _one_pass(self, parsed: DataFrame, table: Table, current: JType, batch_id: int,
                  query_id: str, result: BatchResult, lap: Callable[[str], None]) -> BatchResult:
        """A batch for a table that has columns: load it as the table expects while the
        same pass infers its schema (an observation of the write), so a batch that brings
        nothing new is read, parsed and written once. One that does bring something (a
        new field, a wider type, a conflicting value) is written again with its plan."""
        expected = expected_plan(current, self._last_plan)
        observation = Observation(f"lake-batch-{uuid.uuid4().hex}")
        base = self._data_path(table, query_id, batch_id)
        cast, loads = struct_loads(expected)
        self._write_rows(parsed.observe(observation, *self._stats()), loads, base, cast)
        stats = observation.get
        lap("write")
        if int(stats["n"]) == 0:
            _remove(base)
            return result
        end_offsets = self._end_offsets(parsed, batch_id)
        plan = plan_merge(current, prune(parse_variant_schema(stats["s"])))
        good = self._land_bad(parsed, stats, plan, batch_id, query_id, end_offsets, result,
                              lap)
        files: list[str] = []
        if good:
            if not covers(expected, plan):
                self._write_rows(parsed, load_expressions(plan), base)
                lap("rewrite")
            files = _list_parquet(base)
        else:
            _remove(base)
        self._commit(plan, files, batch_id, query_id, end_offsets, good, result.quarantined)
        lap("commit")
        self._last_plan = plan
        result.rows, result.files = good, len(files)
        return result

    def _stats(self) -> list[Column]:
        """What a batch's inference aggregates: the schema of its JSON objects, its count,
        its bad records' count and (a bounded number of) the bad records themselves."""
        return [
            F.expr("schema_of_variant_agg(CASE WHEN _status = 'ok' THEN v END)").alias("s"),
            F.count(F.lit(1)).alias("n"),
            F.sum(F.expr(f"CASE WHEN {_BAD} THEN 1 ELSE 0 END")).alias("bad"),
            F.expr(f"slice(collect_list(CASE WHEN {_BAD} AND coalesce(octet_length(_raw), "
                   f"0) <= {int(self.quarantine_collect_bytes)} THEN {_QUARANTINE_ROW} "
                   f"END), 1, {max(int(self.quarantine_collect_rows), 0)})").alias("q"),
        ]

    def _land_bad(self, parsed: DataFrame, stats: Any, plan: MergePlan, batch_id: int,
                  query_id: str, end_offsets: dict[str, dict[str, int]],
                  result: BatchResult, lap: Callable[[str], None]) -> int:
        """Quarantine the batch's bad records; fill in the result; return the good count."""
        total, bad = int(stats["n"]), int(stats["bad"] or 0)
        result.end_offsets = end_offsets
        result.conflicts = plan.conflicts
        result.evolved = plan.evolved
        result.quarantined = bad
        if bad:
            collected = stats["q"] or []
            if len(collected) == bad:
                self._append_quarantine(collected, batch_id, query_id, end_offsets)
            else:  # too many or too large for the driver: Spark writes them
                self._write_quarantine(parsed, batch_id, query_id, end_offsets, bad)
            lap("quarantine")
        return total - bad

    @staticmethod
    def _data_path(table: Table, query_id: str, batch_id: int) -> str:
        return f"{table.location().rstrip('/')}/data/ingest/{query_id}/{batch_id}"

    @staticmethod
    def _write_rows(parsed: DataFrame, loads: list[str], base: str,
                    cast: str | None = None) -> None:
        exprs = ["_topic", "_partition", "_offset", "_timestamp", "_key", *loads,
                 "_topic AS _p_topic", "date_format(_timestamp, 'yyyy-MM-dd') AS _p_day"]
        rows = parsed.where("_status IN ('ok', 'empty')")
        if cast is not None:
            rows = rows.selectExpr("*", cast)
        (rows.selectExpr(*exprs)
         .write.mode("overwrite").partitionBy("_p_topic", "_p_day").parquet(base))

    def _declared(self, parsed: DataFrame) -> JType | None:
        """The registered schemas' types of the batch's schema ids (schema_mapping), when
        its values are decoded through a registry; None: infer them from the values."""
        declared = getattr(self.avro, "declared_type", None)
        if declared is None:
            return None
        ids = parsed.where("_status = 'ok'").selectExpr(
            "conv(hex(substring(_raw, 2, 4)), 16, 10) AS id").distinct().collect()
        return declared([int(r["id"]) for r in ids])  # type: ignore[no-any-return]

    def _parse(self, df: DataFrame) -> DataFrame:
        """Kafka columns, the raw value, its parsed form `v` and a status per record."""
        meta = ["topic AS _topic", "partition AS _partition", "offset AS _offset",
                "timestamp AS _timestamp", "CAST(key AS STRING) AS _key", "value AS _raw"]
        if self.avro is None:
            return df.selectExpr(
                *meta, "try_parse_json(CAST(value AS STRING)) AS v",
                "CAST(NULL AS STRING) AS _decode_error",
            ).withColumn("_status", F.expr(_STATUS.format(text="CAST(_raw AS STRING)")))
        decoder = self.avro

        def decode(value: bytes | None) -> tuple[str | None, str | None]:
            return decoder.decode(value)

        to_json = F.udf(decode, "struct<json:string,error:string>", useArrow=True)
        return (df.selectExpr(*meta).withColumn("_decoded", to_json(F.col("_raw")))
                .selectExpr("*", "try_parse_json(_decoded.json) AS v",
                            "_decoded.error AS _decode_error")
                .withColumn("_status", F.expr(_STATUS.format(text="_decoded.json")))
                .drop("_decoded"))

    def _quarantine_table(self, batch_id: int, query_id: str) -> tuple[str, Table | None]:
        """The quarantine table's name, and the table unless it holds this batch already."""
        name = quarantine_identifier(self.table_name)
        table = with_retry("open quarantine table",
                           lambda: ensure_table(self.catalog, name, quarantine=True))
        done = last_batch(table, query_id)
        return name, (None if done is not None and done >= batch_id else table)

    def _append_quarantine(self, collected: list[Any], batch_id: int, query_id: str,
                           end_offsets: dict[str, dict[str, int]]) -> None:
        """Append the bad records the inference pass collected: one commit, no Spark job."""
        name, table = self._quarantine_table(batch_id, query_id)
        if table is None:
            return
        rows = [r if isinstance(r, dict) else r.asDict() for r in collected]
        data = pa.Table.from_arrays([
            pa.array([r["topic"] for r in rows], pa.string()),
            pa.array([r["partition"] for r in rows], pa.int32()),
            pa.array([r["offset"] for r in rows], pa.int64()),
            pa.array([r["ts"] for r in rows], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            pa.array([r["key"] for r in rows], pa.string()),
            pa.array([None if r["raw"] is None else bytes(r["raw"]) for r in rows],
                     pa.binary()),
            pa.array([r["error"] or json_error(None if r["raw"] is None else bytes(r["raw"]))
                      for r in rows], pa.string()),
        ], schema=_QUARANTINE_ARROW)
        summary = {SUMMARY_QUERY: query_id, SUMMARY_BATCH: str(batch_id),
                   SUMMARY_OFFSETS: json.dumps(end_offsets), SUMMARY_ROWS: str(len(rows))}

        def attempt() -> None:
            fresh = self.catalog.load_table(name)
            if (last_batch(fresh, query_id) or -1) >= batch_id:
                return
            tx = fresh.transaction()
            tx.append(data, snapshot_properties=summary)
            tx.set_properties({PROP_LAST_BATCH + query_id: str(batch_id)})
            tx.commit_transaction()

        with_retry(f"commit batch {batch_id} to {name}", attempt)

    def _write_quarantine(self, parsed: DataFrame, batch_id: int, query_id: str,
                          end_offsets: dict[str, dict[str, int]], bad: int) -> None:
        name, table = self._quarantine_table(batch_id, query_id)
        if table is None:
            return
        explain = F.udf(json_error, "string", useArrow=True)
        base = f"{table.location().rstrip('/')}/data/ingest/{query_id}/{batch_id}"
        (parsed.where(_BAD)
         .select("_topic", "_partition", "_offset", "_timestamp", "_key",
                 F.col("_raw").alias("raw"),
                 F.coalesce(F.col("_decode_error"), explain(F.col("_raw"))).alias("error"),
                 F.col("_topic").alias("_p_topic"),
                 F.date_format("_timestamp", "yyyy-MM-dd").alias("_p_day"))
         .write.mode("overwrite").partitionBy("_p_topic", "_p_day").parquet(base))
        files = _list_parquet(base)
        summary = {SUMMARY_QUERY: query_id, SUMMARY_BATCH: str(batch_id),
                   SUMMARY_OFFSETS: json.dumps(end_offsets), SUMMARY_ROWS: str(bad)}

        def attempt() -> None:
            fresh = self.catalog.load_table(name)
            if (last_batch(fresh, query_id) or -1) >= batch_id:
                return
            tx = fresh.transaction()
            tx.add_files(files, snapshot_properties=summary, check_duplicate_files=False)
            tx.set_properties({PROP_LAST_BATCH + query_id: str(batch_id)})
            tx.commit_transaction()

        with_retry(f"commit batch {batch_id} to {name}", attempt)

    def _commit(self, plan: MergePlan, files: list[str], batch_id: int, query_id: str,
                end_offsets: dict[str, dict[str, int]], good: int, bad: int) -> None:
        start = (checkpoint_offsets(self.checkpoint, batch_id - 1)
                 if self.checkpoint is not None and batch_id > 0 else None)
        summary = {SUMMARY_QUERY: query_id, SUMMARY_BATCH: str(batch_id),
                   SUMMARY_OFFSETS: json.dumps(end_offsets), SUMMARY_ROWS: str(good),
                   SUMMARY_QUARANTINED: str(bad)}
        if start is not None:
            summary[SUMMARY_START] = json.dumps(start)
        new_columns = pa.schema([pa.field(n, to_arrow(t)) for n, t in plan.table.fields])

        def attempt() -> None:
            table = self.catalog.load_table(self.table_name)
            if (last_batch(table, query_id) or -1) >= batch_id:
                return  # an earlier attempt of this batch got through
            tx = table.transaction()
            current = _data_type(table)
            if plan.evolved or any(current.field(n) != t for n, t in plan.table.fields):
                with tx.update_schema() as update:
                    update.union_by_name(new_columns)
            # (also on tables made before the retries were turned off)
            props: dict[str, Any] = {PROP_LAST_BATCH + query_id: str(batch_id),
                                     **NO_ICEBERG_RETRIES}
            merged = json.loads(table.properties.get(PROP_OFFSETS, "{}"))
            for topic, parts in end_offsets.items():
                merged.setdefault(topic, {}).update(parts)
            props[PROP_OFFSETS] = json.dumps(merged)
            conflict_json = _merged_conflicts(table, plan.conflicts, batch_id, query_id,
                                              end_offsets)
            if conflict_json is not None:
                props[PROP_CONFLICTS] = conflict_json
            if files:
                tx.add_files(files, snapshot_properties=summary, check_duplicate_files=False)
            tx.set_properties(props)
            tx.commit_transaction()

        with_retry(f"commit batch {batch_id} to {self.table_name}", attempt)
