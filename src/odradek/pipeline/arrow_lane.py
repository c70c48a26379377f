"""The lake's Arrow lane: a batch of JSON records parsed and written in the Spark task itself.

Each task of the batch (one offset range of one Kafka partition) gets its records as
Arrow batches (`mapInArrow`), parses the values with pyarrow's JSON reader straight into
columns of the table's types (new fields are inferred by the same reader), and writes
Parquet with pyarrow: no variant, no per-row Python objects, no Spark Parquet writer.
The task answers with small rows: the files it wrote (with their columns' types), the bad
records (for the quarantine table) and the last offset it saw per partition. The driver
merges the files' types into the table's with the same plan as the Spark path
(schema_merge) and commits.

The lane lands exactly what the Spark path lands or nothing at all: anything it cannot
reproduce exactly (a value of another type than its column, mixed types, a record that is
an object only after trimming, inferred timestamps, a table column type JSON inference
never makes, too many bad records for the driver) makes the task answer `fallback`, and
the writer runs the batch through the Spark path instead (lake_writer).

Which records are bad is decided as the Spark path decides: a value is quarantined only
when Python's json module refuses it even with invalid UTF-8 replaced (so never a value
Spark's parser would take); a value pyarrow refuses that Python takes sends the batch to
the Spark path.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.json as pj
import pyarrow.parquet as pq

from odradek.pipeline.jsontypes import (
    BOOLEAN,
    DOUBLE,
    LIST,
    LONG,
    STRING,
    STRUCT,
    JType,
    to_arrow,
)
from odradek.pipeline.options import SourceOptions
from odradek.pipeline.range_reader import read_ranges

# What a task answers with, one row per file, bad record, partition end or fallback.
OUT_SCHEMA = ("kind string, path string, rows long, arrow_schema binary, topic string, "
              "partition int, offset long, ts long, key string, raw binary, error string")
INPUT_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")
LANE_KINDS = (LONG, DOUBLE, BOOLEAN, STRING, STRUCT, LIST)
_ROW = re.compile(r" in row (\d+)$")
_DAY_US = 86_400_000_000
META = ("_topic", "_partition", "_offset", "_timestamp", "_key")


class Fallback(Exception):
    """This batch needs the Spark path; the message says why (logged by the writer)."""


def lane_type(t: JType) -> bool:
    """Whether a table column of this type is one the lane fills exactly as Spark does."""
    if t.kind not in LANE_KINDS:
        return False
    if t.kind == LIST:
        return t.element is not None and lane_type(t.element)
    return all(lane_type(f) for _, f in t.fields)


def inferred(dtype: pa.DataType) -> JType | None:
    """The JType of a column pyarrow's JSON reader made, as Spark's inference would name it;
    None for what carries no type yet (only nulls, empty objects, empty lists)."""
    if pa.types.is_struct(dtype):
        kept = tuple((f.name, t) for f in dtype
                     if (t := inferred(f.type)) is not None)
        return JType(STRUCT, kept) if kept else None
    if pa.types.is_list(dtype):
        element = inferred(dtype.value_type)
        return None if element is None else JType(LIST, element=element)
    if pa.types.is_null(dtype):
        return None
    if pa.types.is_int64(dtype):
        return JType(LONG)
    if pa.types.is_float64(dtype):
        return JType(DOUBLE)
    if pa.types.is_boolean(dtype):
        return JType(BOOLEAN)
    if pa.types.is_string(dtype):
        return JType(STRING)
    raise Fallback(f"pyarrow inferred {dtype} where Spark infers a string or number")


def canonical(t: JType, table_t: JType | None) -> JType:
    """Fields in the table's order, then the new ones sorted by name (Spark's variant
    schemas list an object's fields sorted), at every depth."""
    if t.kind == STRUCT:
        known = table_t.fields if table_t is not None and table_t.kind == STRUCT else ()
        names = [n for n, _ in known if t.field(n) is not None]
        names += sorted(n for n, _ in t.fields if n not in names)
        return JType(STRUCT, tuple(
            (n, canonical(t.field(n) or JType(STRING),
                          table_t.field(n) if table_t is not None else None))
            for n in names))
    if t.kind == LIST:
        assert t.element is not None
        element = table_t.element if table_t is not None and table_t.kind == LIST else None
        return JType(LIST, element=canonical(t.element, element))
    return t


def union(a: JType, b: JType) -> JType:
    """The type that holds values of both, as one batch's inference would name it."""
    if a == b:
        return a
    if {a.kind, b.kind} == {LONG, DOUBLE}:
        return JType(DOUBLE)
    if a.kind == b.kind == STRUCT:
        fields = [(n, union(t, o) if (o := b.field(n)) is not None else t) for n, t in a.fields]
        fields += [(n, t) for n, t in b.fields if a.field(n) is None]
        return JType(STRUCT, tuple(fields))
    if a.kind == b.kind == LIST:
        assert a.element is not None and b.element is not None
        return JType(LIST, element=union(a.element, b.element))
    raise Fallback(f"values of types {a.render()} and {b.render()} in one batch")


def table_columns(schema: pa.Schema, table_t: JType) -> JType:
    """The data columns of a lane file, as one canonical struct."""
    fields = []
    for f in schema:
        t = inferred(f.type)
        if t is not None:
            fields.append((f.name, t))
    return canonical(JType(STRUCT, tuple(fields)), table_t)


def classify(raw: bytes) -> bool:
    """True: a JSON object (Spark would land it); False: not one (quarantined)."""
    try:
        value = json.loads(raw.decode("utf-8", errors="replace"))
    except (json.JSONDecodeError, RecursionError):
        return False
    return isinstance(value, dict)


@dataclass
class LaneSpec:
    """What every task of one batch needs; pickled into the tasks."""

    base: str  # the batch's data directory (a URI pyarrow.fs opens)
    table: JType  # the table's data columns before the batch
    collect_rows: int  # more bad records than this in a task: the Spark path writes them
    collect_bytes: int  # a bad record larger than this: likewise
    chunk_rows: int = 65_536  # records parsed per call of the JSON reader
    file_rows: int = 4_000_000  # a file is closed and another begun at this many rows
    # registry-framed values: their registry_values.FramedDecoder, and the kind of task
    # that decodes them (lane_avro.RegistryTask; pickled by name, so this module needs
    # no import of it)
    avro: Any = None
    task: Any = None


@dataclass
class _Writer:
    path: str
    schema: pa.Schema
    stream: Any
    writer: pq.ParquetWriter
    topic: str
    rows: int = 0


@dataclass
class _Task:
    spec: LaneSpec
    explicit: pa.Schema
    fs: pafs.FileSystem
    root: str
    writers: dict[tuple[str, int], _Writer] = field(default_factory=dict)
    done: list[_Writer] = field(default_factory=list)
    bad: list[dict[str, Any]] = field(default_factory=list)
    ends: dict[tuple[str, int], int] = field(default_factory=dict)

    def chunk(self, batch: pa.Table) -> None:
        self._note_ends(batch)
        values = batch.column("value").combine_chunks()
        filled = pc.fill_null(values, b"{}")  # a tombstone lands as a row of nulls
        keep = _framed(filled)
        for i in (~keep).nonzero()[0]:
            self._suspect(batch, int(i), filled[int(i)].as_py())
        rows = pc.filter(batch, pa.array(keep)) if not keep.all() else batch
        data, gone = self._parse(pc.filter(filled, pa.array(keep)), rows)
        if gone:
            mask = pa.array([i not in gone for i in range(rows.num_rows)])
            rows = pc.filter(rows, mask)
        if rows.num_rows:
            self._write(rows, data)

    def _note_ends(self, batch: pa.Table) -> None:
        """The last offset the task saw per partition (the batch's end without a
        checkpoint)."""
        for (topic, partition), last in _last_offsets(batch).items():
            self.ends[(topic, partition)] = max(self.ends.get((topic, partition), -1), last)

    def _suspect(self, batch: pa.Table, i: int, raw: bytes) -> None:
        if classify(raw):
            raise Fallback("a JSON object with space or other text around it")
        self._quarantine(batch, i, raw)

    def _quarantine(self, batch: pa.Table, i: int, raw: bytes | None) -> None:
        if len(self.bad) >= self.spec.collect_rows or (
                raw is not None and len(raw) > self.spec.collect_bytes):
            raise Fallback("more (or larger) bad records than the driver collects")
        ts = batch.column("timestamp")[i]
        key = batch.column("key")[i].as_py()
        self.bad.append({
            "topic": batch.column("topic")[i].as_py(),
            "partition": batch.column("partition")[i].as_py(),
            "offset": batch.column("offset")[i].as_py(),
            "ts": None if not ts.is_valid else ts.cast(pa.int64()).as_py(),
            "key": None if key is None else key.decode("utf-8", errors="replace"),
            "raw": raw})

    def _parse(self, values: pa.Array, rows: pa.Table) -> tuple[pa.Table, set[int]]:
        """The values as columns; a value the reader refuses and Python does too is
        quarantined (its index returned) and the reader goes on after it."""
        parts: list[pa.Table] = []
        gone: set[int] = set()
        start, n = 0, len(values)
        while start < n:
            try:
                parts.append(self._read(values, start, n))
                break
            except pa.ArrowInvalid as e:
                found = _ROW.search(str(e))
                if found is None:
                    raise Fallback(f"pyarrow's JSON reader: {e}") from None
                bad = start + int(found.group(1))
                raw = values[bad].as_py() if bad < n else None
                if raw is None or classify(raw):
                    raise Fallback(f"pyarrow's JSON reader: {e}") from None
                if bad > start:
                    parts.append(self._read(values, start, bad))
                self._quarantine(rows, bad, raw)
                gone.add(bad)
                start = bad + 1
        return _concat(parts, self.spec.table), gone

    def _read(self, values: pa.Array, start: int, end: int) -> pa.Table:
        piece = values.slice(start, end - start)
        offsets = piece.buffers()[1]
        first, last = (int.from_bytes(offsets[(piece.offset + k) * 4:(piece.offset + k + 1) * 4],
                                      "little", signed=True)
                       for k in (0, len(piece)))
        data = piece.buffers()[2].slice(first, last - first)
        table = pj.read_json(
            pa.BufferReader(data),
            read_options=pj.ReadOptions(use_threads=False, block_size=max(last - first, 1) + 1),
            parse_options=pj.ParseOptions(explicit_schema=self.explicit,
                                          unexpected_field_behavior="infer"))
        if table.num_rows != end - start:
            raise Fallback("a value that holds more than one JSON object")
        return table

    def _write(self, rows: pa.Table, data: pa.Table) -> None:
        meta = [rows.column("topic"), rows.column("partition"), rows.column("offset"),
                rows.column("timestamp").cast(pa.timestamp("us", tz="UTC")),
                pc.cast(rows.column("key"),
                        options=pc.CastOptions(pa.string(), allow_invalid_utf8=True))]
        whole = pa.Table.from_arrays(meta + data.columns, names=[*META, *data.column_names])
        # Iceberg takes a file's partition from its statistics: one topic and one UTC day
        # a file.
        days = pc.cast(pc.floor(pc.divide(pc.cast(whole.column("_timestamp"), pa.int64())
                                          .cast(pa.float64()), float(_DAY_US))), pa.int64())
        topics = whole.column("_topic")
        keys = pa.table({"t": topics, "d": days}).group_by(["t", "d"]).aggregate([])
        if keys.num_rows == 1:
            self._append(keys.column("t")[0].as_py(), keys.column("d")[0].as_py(), whole)
            return
        for topic, day in zip(keys.column("t").to_pylist(), keys.column("d").to_pylist(),
                              strict=True):
            mask = pc.and_(pc.equal(topics, topic), pc.equal(days, day))
            self._append(topic, day, pc.filter(whole, mask))

    def _append(self, topic: str, day: int, part: pa.Table) -> None:
        current = self.writers.get((topic, day))
        if current is not None and (current.schema != part.schema
                                    or current.rows >= self.spec.file_rows):
            self._close(current)
            current = None
        if current is None:
            path = f"{self.root}/lane-{uuid.uuid4().hex}.parquet"
            stream = self.fs.open_output_stream(path)
            current = _Writer(path, part.schema, stream,
                              pq.ParquetWriter(stream, part.schema, compression="snappy"),
                              topic)
            self.writers[(topic, day)] = current
        current.writer.write_table(part)
        current.rows += part.num_rows

    def _close(self, w: _Writer) -> None:
        w.writer.close()
        w.stream.close()
        self.done.append(w)
        self.writers = {k: v for k, v in self.writers.items() if v is not w}

    def finish(self) -> list[_Writer]:
        for w in list(self.writers.values()):
            self._close(w)
        return self.done

    def answers(self) -> list[dict[str, Any]]:
        """Rows a kind of task adds to its answer (lane_avro: the schema ids it saw)."""
        return []

    def discard(self) -> None:
        for w in list(self.writers.values()):
            try:
                w.writer.close()
                w.stream.close()
            except Exception:  # a half-written file is deleted below either way
                pass
            self.done.append(w)
        for w in self.done:
            with contextlib.suppress(OSError):
                self.fs.delete_file(w.path)


def _framed(values: pa.Array) -> np.ndarray:
    """Per value (none null): does it start with `{` and end with `}`? Read off the
    array's buffers (pyarrow's binary_slice from the end failed on some arrays)."""
    width = np.int64 if pa.types.is_large_binary(values.type) else np.int32
    offsets: np.ndarray[Any, np.dtype[np.int64]] = np.frombuffer(
        values.buffers()[1], dtype=width)[values.offset:values.offset + len(values) + 1].astype(
        np.int64)
    starts, ends = offsets[:-1], offsets[1:]
    framed = np.zeros(len(values), dtype=bool)
    data = values.buffers()[2]
    if data is None:
        return framed
    raw = np.frombuffer(data, dtype=np.uint8)
    some = ends > starts
    framed[some] = (raw[starts[some]] == ord("{")) & (raw[ends[some] - 1] == ord("}"))
    return framed


def _last_offsets(batch: pa.Table) -> dict[tuple[str, int], int]:
    grouped = batch.select(["topic", "partition", "offset"]).group_by(
        ["topic", "partition"]).aggregate([("offset", "max")])
    return {(t, p): o for t, p, o in zip(grouped.column("topic").to_pylist(),
                                          grouped.column("partition").to_pylist(),
                                          grouped.column("offset_max").to_pylist(),
                                          strict=True)}


def _concat(parts: list[pa.Table], table_t: JType) -> pa.Table:
    """The parsed pieces of one chunk as one table of canonical column types."""
    if not parts:
        return pa.table({})
    types = [table_columns(p.schema, table_t) for p in parts]
    clash = [n for t in types for n in t.names() if n in META]
    if clash:
        raise Fallback(f"a field named {clash[0]}, as a Kafka column of the table")
    merged = types[0]
    for t in types[1:]:
        merged = canonical(union(merged, t), table_t)
    target = pa.schema([pa.field(n, to_arrow(t)) for n, t in merged.fields])
    conformed = []
    for p in parts:
        columns = []
        for f in target:
            if f.name in p.column_names:
                columns.append(p.column(f.name).cast(f.type))
            else:
                columns.append(pa.nulls(p.num_rows, f.type))
        conformed.append(pa.Table.from_arrays(columns, schema=target))
    return pa.concat_tables(conformed)


def _rows(kind: str, **values: Any) -> dict[str, Any]:
    return {"kind": kind, **values}


_OUT = pa.schema([
    pa.field("kind", pa.string()), pa.field("path", pa.string()), pa.field("rows", pa.int64()),
    pa.field("arrow_schema", pa.binary()), pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()), pa.field("offset", pa.int64()),
    pa.field("ts", pa.int64()), pa.field("key", pa.string()), pa.field("raw", pa.binary()),
    pa.field("error", pa.string())])


def run_task(spec: LaneSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The `mapInArrow` function: a task's records in, what it wrote out (OUT_SCHEMA)."""
    fs, root = pafs.FileSystem.from_uri(spec.base)
    fs.create_dir(root, recursive=True)
    explicit = pa.schema([pa.field(n, to_arrow(t)) for n, t in spec.table.fields])
    task = (spec.task or _Task)(spec, explicit, fs, root)
    scheme = spec.base.split("://", 1)[0] + "://" if "://" in spec.base else ""
    pending: list[pa.RecordBatch] = []
    size = 0
    try:
        for batch in batches:
            pending.append(batch)
            size += batch.num_rows
            if size >= spec.chunk_rows:
                task.chunk(pa.Table.from_batches(pending))
                pending, size = [], 0
        if pending:
            task.chunk(pa.Table.from_batches(pending))
        written = task.finish()
    except Exception as e:  # any surprise: the Spark path does the batch
        task.discard()
        reason = str(e) if isinstance(e, Fallback) else f"{type(e).__name__}: {e}"
        yield pa.RecordBatch.from_pylist([_rows("fallback", error=reason)], schema=_OUT)
        return
    out = [_rows("file", path=(f"{scheme}{w.path}" if scheme == "file://" else
                               spec.base.rstrip("/") + w.path[len(root.rstrip("/")):]),
                 rows=w.rows, topic=w.topic,
                 arrow_schema=w.schema.serialize().to_pybytes()) for w in written]
    out += [_rows("bad", **b) for b in task.bad]
    out += [_rows("end", topic=t, partition=p, offset=o) for (t, p), o in task.ends.items()]
    out += [_rows(**a) for a in task.answers()]
    if out:
        yield pa.RecordBatch.from_pylist(out, schema=_OUT)


def file_type(schema: pa.Schema, table_t: JType) -> JType:
    """A lane file's data columns (its Kafka columns left out), canonical."""
    return table_columns(pa.schema([f for f in schema if f.name not in META]), table_t)


def batch_type(schemas: list[pa.Schema], table_t: JType) -> JType:
    """The batch's type as Spark's inference would give it: every file's, merged."""
    merged = JType(STRUCT, ())
    for schema in schemas:
        merged = canonical(union(merged, file_type(schema, table_t)), table_t)
    return merged


def conform(uri: str, schema: pa.Schema, table_t: JType) -> str:
    """The file at `uri` with each data column cast to the table's type for it (a new
    struct field another task saw, or long values of a field another task saw as double),
    written anew; the path of the file to commit."""
    wanted = pa.schema([f if f.name in META else
                        pa.field(f.name, to_arrow(t)) if (t := table_t.field(f.name)) else f
                        for f in schema])
    if wanted == schema:
        return uri
    fs, path = pafs.FileSystem.from_uri(uri)
    with fs.open_input_file(path) as source:
        data = pq.read_table(source)
    cast = pa.Table.from_arrays([data.column(f.name).cast(f.type) for f in wanted],
                                schema=wanted)
    new_path = path[:-len(".parquet")] + "-conformed.parquet"
    with fs.open_output_stream(new_path) as sink:
        pq.write_table(cast, sink, compression="snappy")
    fs.delete_file(path)
    return uri[:-len(".parquet")] + "-conformed.parquet"


def run_ranges(spec: LaneSpec, options: SourceOptions,
               batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """`run_task` over the records of the offset ranges it is given (the source's
    `rangesOnly` rows), read here: the records never pass through the JVM."""
    return run_task(spec, read_ranges(options, batches))
