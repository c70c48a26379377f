"""Schemaless Avro bodies straight into Arrow columns of the table's types.

The lake's Arrow lane turns a batch of registry-framed Avro values into the table's
columns without going through JSON. The rule is exactness: every value this module
accepts lands as today's path lands it (fastavro → FramedDecoder's JSON → Spark's cast
into the column, registry_values and schema_merge), every body today's path quarantines
is reported with the same reason, and whatever it cannot reproduce raises
`AvroUnsupported` so the lane falls back to today's path for the batch.

How: the bodies are concatenated into one in-memory Avro object container block and read
by polars' vectorised reader, with a reader schema of plain wire types (int as long, enum
as its index, logical types as their base type, synthetic names), so every conversion is
ours. polars is lax where fastavro is strict (it reads past a body's end into the next,
takes any non-null union index as the value, reads a boolean byte 2 as false, wraps an
int), so the result is proven before it is used: each row's canonical Avro size, computed
from the decoded values, must equal its body's length, which (as no value takes fewer
bytes than its canonical encoding) means every body was read from its own first byte to
its last with canonical varints; then the bytes the values do not show (union indexes,
booleans) are checked in place. A row that fails a check, or holds a value fastavro would
refuse (a date past year 9999), is decoded alone with fastavro for its reason.

Entry points: `decode_bodies` (one writer schema's bodies), `plan` (the same, the schema
checked once for many batches), `FramedAvro` (a Kafka value column of framed values, by
schema id through FramedDecoder's registry). Refused, with AvroUnsupported: unions of
several non-null types, recursive types, null fields, decimals past 38 digits, the
logical types duration, timestamp-nanos and any unknown one, casts into a column of
another kind (a number into a string column), non-canonical encodings, and values
rendered otherwise by fastavro's JSON (an upper-case uuid, a decimal wider than its
precision, an int beyond 32 bits for an int column, a map with a repeated key or a key
from U+E000 on).
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import Any, TypeAlias

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from odradek.pipeline.avro_columns import (
    AvroUnsupported,
    Batch,
    Node,
    convert,
    joined_values,
    layout,
)
from odradek.pipeline.jsontypes import (
    BOOLEAN,
    DATE,
    DECIMAL,
    DOUBLE,
    FLOAT,
    INT,
    LIST,
    LONG,
    MAP,
    STRING,
    STRUCT,
    TIMESTAMP,
    JType,
    json_error,
    to_arrow,
)
from odradek.pipeline.registry_values import FramedDecoder, SchemaLookupError
from odradek.pipeline.schema_mapping import avro_names

__all__ = ["NOT_FRAMED", "NOT_FRAMED_REASON", "NULL_VALUE", "AvroPlan", "AvroUnsupported",
           "Bodies", "FramedAvro", "decode_bodies", "plan", "schema_ids", "strip_framing"]

# a list, or an Arrow binary column
Bodies: TypeAlias = Sequence[bytes] | pa.Array | pa.ChunkedArray

_SYNC = b"odradek-avro-blk"  # any 16 bytes: the block is ours alone
_NOT_CANONICAL = ("bodies fastavro takes are not read exactly here (a non-canonical "
                  "encoding: an array in several blocks or with a byte count, a padded "
                  "or over-long varint)")
_LOGICAL = {("int", "date"), ("long", "timestamp-millis"), ("long", "timestamp-micros"),
            ("long", "local-timestamp-millis"), ("long", "local-timestamp-micros"),
            ("bytes", "decimal"), ("fixed", "decimal"), ("string", "uuid"),
            ("int", "time-millis"), ("long", "time-micros")}


def _wire(schema: Any, namespace: str, named: dict[str, Any], open_: frozenset[str]) -> Node:
    if isinstance(schema, list):
        others = [i for i, b in enumerate(schema) if b != "null"]
        nulls = [i for i, b in enumerate(schema) if b == "null"]
        if len(schema) != 2 or len(others) != 1 or len(nulls) != 1:
            raise AvroUnsupported(f"union {json.dumps(schema)}: only a union of null and "
                                  "one type decodes here")
        inner = _wire(schema[others[0]], namespace, named, open_)
        return Node("nullable", inner=inner, null_index=nulls[0])
    if isinstance(schema, str):
        if schema in ("boolean", "int", "long", "float", "double", "string", "bytes"):
            return Node(schema)
        if schema == "null":
            raise AvroUnsupported("a field of type null has no column form here")
        full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
        for name in (full, schema):
            if name in named:
                if name in open_:
                    raise AvroUnsupported(f"recursive type {name} has no column form")
                found = named[name]
                space = name.rsplit(".", 1)[0] if "." in name else ""
                return _wire(found, space, named, open_ | {name})
        raise AvroUnsupported(f"unknown Avro type {schema}")
    if not isinstance(schema, dict):
        raise AvroUnsupported(f"not an Avro type: {schema!r}")
    kind, logical = schema.get("type"), schema.get("logicalType")
    if isinstance(kind, list | dict):
        return _wire(kind, namespace, named, open_)
    if logical is not None and (kind, logical) not in _LOGICAL:
        raise AvroUnsupported(f"logical type {logical} on {kind} does not decode here")
    if kind in ("record", "error", "enum", "fixed"):
        name = str(schema.get("name"))
        space = schema.get("namespace", namespace) if "." not in name else ""
        full = f"{space}.{name}" if space else name
        space = full.rsplit(".", 1)[0] if "." in full else ""
        if kind == "enum":
            return Node("enum", symbols=tuple(str(s) for s in schema.get("symbols", [])))
        if kind == "fixed":
            precision, scale = _decimal(schema)
            return Node("fixed", logical, size=int(schema["size"]), precision=precision,
                         scale=scale)
        return Node("record", fields=tuple(
            (str(f["name"]), _wire(f["type"], space, named, open_ | {full}))
            for f in schema.get("fields", [])))
    if kind == "array":
        return Node("array", inner=_wire(schema.get("items"), namespace, named, open_))
    if kind == "map":  # encoded as an array of (string key, value) pairs
        values = _wire(schema.get("values"), namespace, named, open_)
        return Node("map", inner=Node("record", fields=(("key", Node("string")),
                                                          ("value", values))))
    if kind == "bytes" and logical == "decimal":
        precision, scale = _decimal(schema)
        return Node("bytes", logical, precision=precision, scale=scale)
    if isinstance(kind, str) and kind in ("int", "long", "string") and logical:
        return Node(kind, logical)
    return _wire(kind, namespace, named, open_)


def _decimal(schema: dict[str, Any]) -> tuple[int, int]:
    if schema.get("logicalType") != "decimal":
        return 0, 0
    precision, scale = schema.get("precision"), schema.get("scale", 0)
    if not isinstance(precision, int) or not isinstance(scale, int) \
            or not 0 < precision <= 38 or not 0 <= scale <= precision:
        raise AvroUnsupported(f"decimal({precision}, {scale}) has no decimal column here")
    return precision, scale


def _reader_schema(node: Node, counter: list[int]) -> Any:
    """The plain wire form polars reads: ints as longs (same encoding, so an int field's
    out-of-range value is seen, not wrapped), an enum as its index, logical types as
    their base type, fresh names (the encoding has no names in it)."""
    counter[0] += 1
    if node.kind == "nullable":
        assert node.inner is not None
        inner = _reader_schema(node.inner, counter)
        return ["null", inner] if node.null_index == 0 else [inner, "null"]
    if node.kind in ("int", "long", "enum"):
        return "long"
    if node.kind == "fixed":
        return {"type": "fixed", "name": f"x{counter[0]}", "size": node.size}
    if node.kind == "record":
        return {"type": "record", "name": f"r{counter[0]}", "fields": [
            {"name": f"f{i}", "type": _reader_schema(t, counter)}
            for i, (_, t) in enumerate(node.fields)]}
    if node.kind in ("array", "map"):  # polars lacks maps: their pairs as an array
        assert node.inner is not None
        return {"type": "array", "items": _reader_schema(node.inner, counter)}
    return node.kind


# ---- targets -------------------------------------------------------------------------

def _check_target(node: Node, target: JType, where: str) -> None:
    """Refuse a writer type whose value today's path would land in this column by a cast
    we do not reproduce (a number into a string column, a record as JSON text...)."""
    k, t = node.kind, target.kind
    if k == "nullable":
        assert node.inner is not None
        _check_target(node.inner, target, where)
        return
    ok = {"boolean": (BOOLEAN,), "int": (INT, LONG, DOUBLE), "long": (LONG, DOUBLE),
          "float": (FLOAT, DOUBLE), "double": (DOUBLE,), "string": (STRING,),
          "enum": (STRING,), "bytes": (STRING,), "fixed": (STRING,), "record": (STRUCT,),
          "array": (LIST,), "map": (MAP,)}[k]
    if node.logical in ("time-millis", "time-micros"):
        ok = (STRING,)  # fastavro's datetime.time, as its isoformat() text
    elif node.logical == "date":
        ok = (DATE,)
    elif node.logical and "timestamp" in node.logical:
        ok = (TIMESTAMP,)
    elif node.logical == "decimal":
        ok = (DECIMAL,) if target.scale == node.scale \
            and target.precision >= node.precision else ()
    if t not in ok:
        raise AvroUnsupported(f"{where}: Avro {node.logical or k} into a {target.render()} "
                              "column is not reproduced here")
    if k == "record":
        mine = dict(node.fields)
        for name, sub in target.fields:
            if name in mine:
                _check_target(mine[name], sub, f"{where}.{name}" if where else name)
    elif k == "array":
        assert node.inner is not None and target.element is not None
        _check_target(node.inner, target.element, f"{where}[]")
    elif k == "map":
        assert node.inner is not None and target.element is not None
        _check_target(node.inner.fields[1][1], target.element, f"{where}{{}}")


# ---- the entry point -----------------------------------------------------------------

def _varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _container(reader_schema: Any, data: memoryview, count: int) -> bytes:
    meta = {b"avro.schema": json.dumps(reader_schema).encode(), b"avro.codec": b"null"}
    head = bytearray(b"Obj\x01")
    head += _varint(len(meta))
    for key, value in meta.items():
        head += _varint(len(key)) + key + _varint(len(value)) + value
    head += _varint(0) + _SYNC + _varint(count) + _varint(len(data))
    return b"".join((head, data, _SYNC))


def _one_chunk(column: pa.ChunkedArray) -> pa.Array:
    if column.num_chunks == 1:
        return column.chunk(0)
    return pa.concat_arrays(column.chunks) if column.num_chunks else pa.array([], column.type)


def _as_arrow(bodies: Bodies) -> pa.Array:
    """A binary or large binary array of the bodies (kept as it is when it is one)."""
    if isinstance(bodies, pa.ChunkedArray):
        bodies = bodies.combine_chunks()
    arr = bodies if isinstance(bodies, pa.Array) else pa.array(bodies, pa.large_binary())
    if arr.null_count:
        raise ValueError("a null body: only values are decoded here")
    if arr.type not in (pa.binary(), pa.large_binary()):
        arr = arr.cast(pa.large_binary())
    return arr


class AvroPlan:
    """A writer schema checked against a target, ready to decode batches."""

    def __init__(self, writer_schema: Any, target: JType, references: Sequence[Any],
                 schema_id: int | None) -> None:
        if target.kind != STRUCT:
            raise AvroUnsupported(f"the target is a {target.render()}, not a struct")
        named = avro_names([*references, writer_schema])
        self.node = _wire(writer_schema, "", named, frozenset())
        if self.node.kind != "record":
            raise AvroUnsupported("the writer schema is not a record")
        _check_target(self.node, target, "")
        self.target = target
        self.reader = _reader_schema(self.node, [0])
        self.writer_schema = writer_schema
        self.references = references
        self.schema_id = schema_id
        self._fastavro: Any = None

    def reason(self, body: bytes) -> str | None:
        """Why fastavro refuses this body, in the current decoders' words; None: it takes it."""
        from fastavro import parse_schema, schemaless_reader

        if self._fastavro is None:
            named: dict[str, Any] = {}
            for ref in self.references:
                parse_schema(ref, named_schemas=named)
            self._fastavro = parse_schema(self.writer_schema, named_schemas=named)
        stream = io.BytesIO(body)
        try:
            schemaless_reader(stream, self._fastavro, None)
            left = len(body) - stream.tell()
            if left:
                raise ValueError(f"{left} bytes left over")
        except Exception as e:  # fastavro raises many kinds for corrupt input
            if self.schema_id is None:  # avro_values.AvroDecoder's words
                if isinstance(e, ValueError) and str(e).endswith("bytes left over"):
                    return f"not an Avro record of this schema: {e}"
                return f"not an Avro record of this schema: {type(e).__name__}: {e}"
            return f"not a record of schema {self.schema_id}: {type(e).__name__}: {e}"
        return None

    def decode(self, values: Bodies) -> tuple[pa.Table, dict[int, str]]:
        bodies = _as_arrow(values)
        errors: dict[int, str] = {}
        keep = list(range(len(bodies)))
        table = self._block(bodies)
        if table is None:  # polars or the size proof refused: find the bad bodies
            for i, body in enumerate(bodies.to_pylist()):
                why = self.reason(body)
                if why is not None:
                    errors[i] = why
            if not errors:
                raise AvroUnsupported(_NOT_CANONICAL)
            keep = [i for i in range(len(bodies)) if i not in errors]
            table = self._block(bodies.take(pa.array(keep, pa.int64())))
            if table is None:
                raise AvroUnsupported(_NOT_CANONICAL)
        out, suspect, nan = table
        drop = np.zeros(len(keep), bool)
        for j in np.flatnonzero(suspect):
            why = self.reason(bodies[keep[j]].as_py())
            if why is None:
                raise AvroUnsupported("a value fastavro takes that is not reproduced here "
                                      f"(body {keep[j]})")
            errors[keep[j]] = why
            drop[j] = True
        for j in np.flatnonzero(nan & ~drop):
            if self.schema_id is None:
                raise AvroUnsupported("NaN or infinity: today's path quarantines it by "
                                      "the framed value")
            # json.dumps writes NaN, Spark refuses that JSON: quarantined by the raw value
            framed = b"\x00" + self.schema_id.to_bytes(4, "big") + bodies[keep[j]].as_py()
            errors[keep[j]] = json_error(framed)
            drop[j] = True
        if drop.any():
            out = out.filter(pa.array(~drop))
        return out, dict(sorted(errors.items()))

    def _block(self, bodies: pa.Array
               ) -> tuple[pa.Table, np.ndarray, np.ndarray] | None:
        import polars as pl
        from polars.exceptions import PanicException, PolarsError

        n = len(bodies)
        if n == 0:
            return self.target_empty(), np.zeros(0, bool), np.zeros(0, bool)
        data, lengths = joined_values(bodies)
        try:
            frame = pl.read_avro(io.BytesIO(_container(self.reader, data, n)))
        except (PolarsError, OSError, PanicException):  # corrupt bodies (it panics on some)
            return None
        if frame.height != n:
            return None
        decoded = frame.to_arrow()
        columns = [_one_chunk(column) for column in decoded.columns]
        record = pa.StructArray.from_arrays(columns, names=[f"f{i}" for i in
                                                            range(len(columns))])
        lay = layout(self.node, record)
        if not np.array_equal(lay.sizes, lengths):
            return None
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        batch = Batch(np.frombuffer(data, np.uint8), n)
        struct = convert(lay, self.target, batch, starts, np.arange(n), np.ones(n, bool))
        assert isinstance(struct, pa.StructArray)
        table = pa.Table.from_arrays(
            [struct.field(i) for i in range(struct.type.num_fields)],
            schema=pa.schema([pa.field(name, to_arrow(t)) for name, t in self.target.fields]))
        return table, batch.suspect, batch.nan

    def target_empty(self) -> pa.Table:
        return pa.schema([pa.field(name, to_arrow(t)) for name, t in self.target.fields]
                         ).empty_table()


def decode_bodies(bodies: Bodies, writer_schema: Any, target: JType, *,
                  references: Sequence[Any] = (), schema_id: int | None = None
                  ) -> tuple[pa.Table, dict[int, str]]:
    """Schemaless Avro bodies (framing stripped; a list, or an Arrow binary column), all
    of `writer_schema` (parsed JSON; `references`: the parsed schemas it names), as a
    table of `target`'s columns (one row per good body, in order) and {index: reason}
    for the bodies that do not decode, in the words of registry_values.FramedDecoder (of
    schema `schema_id`) or, without an id, avro_values.AvroDecoder. Raises
    AvroUnsupported when the result would not be exactly what today's path lands.

    A lane decoding many batches of one schema keeps `plan(...)` and calls its decode."""
    return AvroPlan(writer_schema, target, references, schema_id).decode(bodies)


def plan(writer_schema: Any, target: JType, *, references: Sequence[Any] = (),
         schema_id: int | None = None) -> AvroPlan:
    """The schema checked once (AvroUnsupported if it cannot be done here), for decoding
    many batches with `.decode(bodies)`."""
    return AvroPlan(writer_schema, target, references, schema_id)


def strip_framing(values: pa.Array) -> pa.Array:
    """The Avro bodies of framed values: each without its magic byte and schema id."""
    # an explicit end: pyarrow 26's binary_slice without one failed with "Negative buffer
    # resize" on some taken arrays
    return pc.binary_slice(values, 5, 2 ** 31 - 1)


NULL_VALUE, NOT_FRAMED = -1, -2  # schema_ids' marks for a null value and an unframed one
NOT_FRAMED_REASON = "not in Confluent's wire format (no magic byte and schema id)"


def schema_ids(values: pa.Array) -> np.ndarray:
    """Each value's schema id (int64), NULL_VALUE for a null value, NOT_FRAMED for a
    value without Confluent's framing (shorter than 5 bytes or no magic byte)."""
    heads = pc.binary_slice(values, 0, 5)
    framed = pc.and_(pc.equal(pc.binary_length(heads), 5),
                     pc.starts_with(heads.cast(pa.large_binary()), b"\x00"))
    is_framed = np.asarray(pc.fill_null(framed, False).to_numpy(zero_copy_only=False))
    out = np.full(len(values), NOT_FRAMED, np.int64)
    out[np.asarray(values.is_null().to_numpy(zero_copy_only=False))] = NULL_VALUE
    where = np.flatnonzero(is_framed)
    if len(where):
        # the 5-byte heads of the framed values, back to back: the id is bytes 1 to 4
        packed = np.frombuffer(joined_values(heads.take(where).cast(pa.large_binary()))[0],
                               np.uint8).reshape(-1, 5)
        out[where] = packed[:, 1:].copy().view(">u4")[:, 0]
    return out


def distinct(ids: np.ndarray) -> list[int]:
    """The distinct ids, sorted (a batch of one id, the common case, without a sort)."""
    if len(ids) == 0:
        return []
    low, high = int(ids.min()), int(ids.max())
    return [low] if low == high else [int(i) for i in np.unique(ids)]


class FramedAvro:
    """Confluent-framed Avro values (a Kafka value column) into the table's columns, each
    value by its schema id through `decoder`'s registry: what the lane needs around
    decode_bodies. A null value is a row of nulls (the lake writes an empty record as
    one); a value that is not framed, of an id the registry lacks, or that does not decode
    gets FramedDecoder's reason. Raises AvroUnsupported when an id's schema is not Avro
    or cannot be decoded here."""

    def __init__(self, decoder: FramedDecoder, target: JType) -> None:
        self.decoder = decoder
        self.target = target
        self._plans: dict[int, AvroPlan] = {}

    def decode(self, values: Bodies, ids: np.ndarray | None = None
               ) -> tuple[pa.Table, dict[int, str]]:
        """`ids`: schema_ids(values), when the caller has them already."""
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        arr = values if isinstance(values, pa.Array) else pa.array(values, pa.large_binary())
        errors: dict[int, str] = {}
        parts: list[tuple[np.ndarray, pa.Table]] = []
        nulls = np.flatnonzero(np.asarray(arr.is_null().to_numpy(zero_copy_only=False)))
        if len(nulls):
            parts.append((nulls, pa.table({n: pa.nulls(len(nulls), to_arrow(t))
                                           for n, t in self.target.fields})))
        every = schema_ids(arr) if ids is None else ids
        for i in np.flatnonzero(every == NOT_FRAMED):
            errors[int(i)] = NOT_FRAMED_REASON
        where = np.flatnonzero(every >= 0)
        framed_ids = every[where]
        seen = distinct(framed_ids)
        for schema_id in seen:
            rows = where if len(seen) == 1 else where[framed_ids == schema_id]
            why, decoded = self._group(schema_id, arr if len(rows) == len(arr)
                                       else arr.take(rows))
            if why is not None:
                errors.update((int(i), why) for i in rows)
                continue
            assert decoded is not None
            table, bad = decoded
            errors.update((int(rows[j]), reason) for j, reason in bad.items())
            parts.append((np.delete(rows, list(bad)), table))
        if not parts:
            return self.target_empty(), errors
        if len(parts) == 1:  # one id and no null value: the rows are in order already
            return parts[0][1], dict(sorted(errors.items()))
        order = np.argsort(np.concatenate([p[0] for p in parts]), kind="stable")
        table = pa.concat_tables([p[1] for p in parts]).take(pa.array(order))
        return table, dict(sorted(errors.items()))

    def _group(self, schema_id: int, values: pa.Array
               ) -> tuple[str | None, tuple[pa.Table, dict[int, str]] | None]:
        """One id's values decoded, or the reason FramedDecoder gives for all of them."""
        if schema_id not in self._plans:
            try:  # the decoder's own lookup, for its words when the id is not usable
                self.decoder._reader(schema_id)
            except SchemaLookupError:
                return f"schema id {schema_id} is not in the registry", None
            except (httpx.HTTPError, ValueError) as e:
                return f"schema id {schema_id}: cannot use its schema: {e}", None
            found = self.decoder._get(f"/schemas/ids/{schema_id}")
            if found.get("schemaType", "AVRO") != "AVRO":
                raise AvroUnsupported(f"schema id {schema_id} is {found['schemaType']}, "
                                      "not Avro")
            refs: dict[str, Any] = {}
            self.decoder._references(found.get("references") or [], None, refs)
            self._plans[schema_id] = AvroPlan(
                json.loads(found["schema"]), self.target,
                [json.loads(r["schema"]) for r in refs.values()], schema_id)
        return None, self._plans[schema_id].decode(strip_framing(values))

    def target_empty(self) -> pa.Table:
        return pa.schema([pa.field(n, to_arrow(t)) for n, t in self.target.fields]
                         ).empty_table()
