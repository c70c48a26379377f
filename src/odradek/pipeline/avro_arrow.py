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
"""

from __future__ import annotations

import functools
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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
from odradek.pipeline.schema_mapping import avro_names


class AvroUnsupported(Exception):
    """This schema, target or batch cannot be decoded here exactly: use today's path."""


# Python's datetime range (fastavro builds datetimes and dates): years 1 to 9999.
_MIN_US, _MAX_US = -62_135_596_800_000_000, 253_402_300_799_999_999
_MIN_DAY, _MAX_DAY = -719_162, 2_932_896
_UUID = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
_SYNC = b"odradek-avro-blk"  # any 16 bytes: the block is ours alone
# A two-branch union's index byte → 1 (null branch) or 2 (value), by the null's position:
# 0 and 2 are the indexes 0 and 1; fastavro also takes 1 and 3, indexes -1 and -2 (from
# the end, as Python indexes a list).
_BRANCH = {0: np.zeros(256, np.int8), 1: np.zeros(256, np.int8)}
_BRANCH[0][[0, 3]], _BRANCH[0][[2, 1]] = 1, 2
_BRANCH[1][[2, 1]], _BRANCH[1][[0, 3]] = 1, 2
_LOGICAL = {("int", "date"), ("long", "timestamp-millis"), ("long", "timestamp-micros"),
            ("long", "local-timestamp-millis"), ("long", "local-timestamp-micros"),
            ("bytes", "decimal"), ("fixed", "decimal"), ("string", "uuid")}


@dataclass(frozen=True)
class _Node:
    """One writer type, reduced to what decoding and converting it needs."""

    kind: str  # boolean int long float double string bytes fixed enum record array nullable
    logical: str | None = None
    fields: tuple[tuple[str, _Node], ...] = ()
    inner: _Node | None = None  # array items; a nullable union's other branch
    null_index: int = 0  # nullable: the null branch's position in the union
    symbols: tuple[str, ...] = ()
    size: int = 0  # fixed
    precision: int = 0
    scale: int = 0


def _wire(schema: Any, namespace: str, named: dict[str, Any], open_: frozenset[str]) -> _Node:
    if isinstance(schema, list):
        others = [i for i, b in enumerate(schema) if b != "null"]
        nulls = [i for i, b in enumerate(schema) if b == "null"]
        if len(schema) != 2 or len(others) != 1 or len(nulls) != 1:
            raise AvroUnsupported(f"union {json.dumps(schema)}: only a union of null and "
                                  "one type decodes here")
        inner = _wire(schema[others[0]], namespace, named, open_)
        return _Node("nullable", inner=inner, null_index=nulls[0])
    if isinstance(schema, str):
        if schema in ("boolean", "int", "long", "float", "double", "string", "bytes"):
            return _Node(schema)
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
            return _Node("enum", symbols=tuple(str(s) for s in schema.get("symbols", [])))
        if kind == "fixed":
            precision, scale = _decimal(schema)
            return _Node("fixed", logical, size=int(schema["size"]), precision=precision,
                         scale=scale)
        return _Node("record", fields=tuple(
            (str(f["name"]), _wire(f["type"], space, named, open_ | {full}))
            for f in schema.get("fields", [])))
    if kind == "array":
        return _Node("array", inner=_wire(schema.get("items"), namespace, named, open_))
    if kind == "map":  # encoded as an array of (string key, value) pairs
        values = _wire(schema.get("values"), namespace, named, open_)
        return _Node("map", inner=_Node("record", fields=(("key", _Node("string")),
                                                          ("value", values))))
    if kind == "bytes" and logical == "decimal":
        precision, scale = _decimal(schema)
        return _Node("bytes", logical, precision=precision, scale=scale)
    if isinstance(kind, str) and kind in ("int", "long", "string") and logical:
        return _Node(kind, logical)
    return _wire(kind, namespace, named, open_)


def _decimal(schema: dict[str, Any]) -> tuple[int, int]:
    if schema.get("logicalType") != "decimal":
        return 0, 0
    precision, scale = schema.get("precision"), schema.get("scale", 0)
    if not isinstance(precision, int) or not isinstance(scale, int) \
            or not 0 < precision <= 38 or not 0 <= scale <= precision:
        raise AvroUnsupported(f"decimal({precision}, {scale}) has no decimal column here")
    return precision, scale


def _reader_schema(node: _Node, counter: list[int]) -> Any:
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


@functools.cache
def _needs(node: _Node) -> tuple[bool, bool]:
    """Whether checking this type needs each value's first byte (union indexes and
    booleans are checked in place), and whether it can find a row suspect at all."""
    if node.kind in ("nullable", "boolean"):
        return True, True
    kids = [_needs(t) for _, t in node.fields] + ([_needs(node.inner)] if node.inner else [])
    leaf = node.kind in ("enum", "float", "double") or node.logical is not None
    return any(k[0] for k in kids), leaf or any(k[1] for k in kids)


# ---- targets -------------------------------------------------------------------------

def _check_target(node: _Node, target: JType, where: str) -> None:
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
    if node.logical == "date":
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


# ---- sizes: proving the decode -------------------------------------------------------

def _varint_size(z: np.ndarray) -> np.ndarray:
    """Bytes of the varint of each (already zigzagged, unsigned) value."""
    top = int(z.max()) if len(z) else 0
    if top < 1 << 7:
        return np.ones(len(z), np.int64)
    size = (z >= np.uint64(1 << 7)).astype(np.int64) + 1
    for bits in range(14, 64, 7):
        if top < 1 << bits:
            break  # most values are small: skip the thresholds none reaches
        size += z >= np.uint64(1 << bits)
    return size


def _zigzag(v: np.ndarray) -> np.ndarray:
    return ((v << 1) ^ (v >> 63)).view(np.uint64)


def _ints(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0 and arr.type == pa.int64():
        return np.frombuffer(arr.buffers()[1], np.int64)[arr.offset:arr.offset + len(arr)]
    return np.asarray(pc.fill_null(arr, 0).to_numpy(zero_copy_only=False), np.int64)


def _nulls(arr: pa.Array) -> np.ndarray:
    return np.asarray(arr.is_null().to_numpy(zero_copy_only=False), bool)


def _lengths(arr: pa.Array) -> np.ndarray:
    if arr.type in (pa.large_binary(), pa.large_string()):  # polars' own: offsets at hand
        offsets = np.frombuffer(arr.buffers()[1], np.int64)
        return np.diff(offsets[arr.offset:arr.offset + len(arr) + 1])
    return _ints(pc.binary_length(arr))


@dataclass
class _Layout:
    """A decoded array with each element's canonical Avro size, and its children's."""

    node: _Node
    arr: pa.Array
    sizes: np.ndarray
    kids: list[_Layout]


def _layout(node: _Node, arr: pa.Array) -> _Layout:
    n = len(arr)
    k = node.kind
    if k == "nullable":
        assert node.inner is not None
        kid = _layout(node.inner, arr)
        valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), bool)
        return _Layout(node, arr, 1 + np.where(valid, kid.sizes, 0), [kid])
    if k in ("int", "long", "enum"):
        return _Layout(node, arr, _varint_size(_zigzag(_ints(arr))), [])
    if k in ("string", "bytes"):
        lengths = _lengths(arr)
        return _Layout(node, arr, _varint_size((lengths * 2).view(np.uint64)) + lengths, [])
    fixed = {"boolean": 1, "float": 4, "double": 8, "fixed": node.size}
    if k in fixed:
        return _Layout(node, arr, np.full(n, fixed[k], np.int64), [])
    if k == "record":
        kids = [_layout(t, arr.field(i)) for i, (_, t) in enumerate(node.fields)]
        sizes = np.zeros(n, np.int64)
        for kid in kids:
            sizes += kid.sizes
        return _Layout(node, arr, sizes, kids)
    assert k in ("array", "map") and node.inner is not None
    kid = _layout(node.inner, arr.values)
    offsets = np.asarray(arr.offsets.to_numpy(), np.int64)
    counts = np.diff(offsets)
    running = np.concatenate([[0], np.cumsum(kid.sizes)])
    inside = running[offsets[1:]] - running[offsets[:-1]]
    # one block (its count, the items, the 0 that ends it), or the lone 0 of an empty one
    sizes = np.where(counts > 0, _varint_size((counts * 2).view(np.uint64)) + inside + 1, 1)
    return _Layout(node, arr, sizes, [kid])


# ---- conversion into the target, with checks -----------------------------------------

class _Batch:
    """The call's state: the concatenated bodies and the rows found suspect."""

    def __init__(self, data: np.ndarray, rows: int) -> None:
        self.data = data
        self.suspect = np.zeros(rows, bool)  # decode alone with fastavro
        self.nan = np.zeros(rows, bool)  # NaN or infinity: Spark refuses the JSON

    def mark(self, bad: np.ndarray, rows: np.ndarray, live: np.ndarray,
             into: np.ndarray | None = None) -> None:
        hit = bad & live
        if hit.any():
            (self.suspect if into is None else into)[rows[hit]] = True


def _convert(lay: _Layout, target: JType, b: _Batch, starts: np.ndarray, rows: np.ndarray,
             live: np.ndarray) -> pa.Array:
    """The layout's values as the target's Arrow type. `starts`: each element's first
    byte in the batch's data; `rows`: its body; `live`: it and its parents are present."""
    node, arr = lay.node, lay.arr
    k = node.kind
    if k == "nullable":
        valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), bool)
        # the union index byte: 1 says the null branch, 2 the other, 0 neither
        branch = _BRANCH[node.null_index][b.data[np.minimum(starts, len(b.data) - 1)]]
        b.mark(branch != np.where(valid, 2, 1), rows, live)
        return _convert(lay.kids[0], target, b, starts + 1, rows, live & valid)
    if k == "record":
        mine = {name: i for i, (name, _) in enumerate(node.fields)}
        offset = starts
        kid_starts = []
        for kid in lay.kids:
            kid_starts.append(offset)
            if _needs(node)[0]:
                offset = offset + kid.sizes
        children = []
        for name, sub in target.fields:
            i = mine.get(name, -1)
            children.append(pa.nulls(len(arr), to_arrow(sub)) if i < 0 else
                            _convert(lay.kids[i], sub, b, kid_starts[i], rows, live))
        mask = pc.invert(arr.is_valid()) if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(to_arrow(target)), mask=mask)
    if k in ("array", "map"):
        assert target.element is not None
        offsets = np.asarray(arr.offsets.to_numpy(), np.int64)
        counts = np.diff(offsets)
        kid = lay.kids[0]
        n_items = len(kid.arr)
        need_starts, need_rows = _needs(kid.node)
        item_starts = item_rows = np.zeros(n_items, np.int64)
        item_live = np.zeros(n_items, bool)
        if need_rows:  # else nothing inside can be wrong: skip the bookkeeping
            owner = np.repeat(np.arange(len(arr)), counts)
            idx = np.arange(offsets[0], offsets[-1])
            item_rows = np.zeros(n_items, np.int64)
            item_rows[idx] = rows[owner]
            item_live[idx] = live[owner]
            if need_starts:
                running = np.concatenate([[0], np.cumsum(kid.sizes)])
                first = starts + _varint_size((counts * 2).view(np.uint64)) \
                    - running[offsets[:-1]]
                item_starts = np.zeros(n_items, np.int64)
                item_starts[idx] = first[owner] + running[idx]
        mask = pc.invert(arr.is_valid()) if arr.null_count else None
        if k == "map":
            pairs = JType(STRUCT, (("key", JType(STRING)), ("value", target.element)))
            entries = _convert(kid, pairs, b, item_starts, item_rows, item_live)
            return _map(entries, offsets, counts, to_arrow(target), mask)
        values = _convert(kid, target.element, b, item_starts, item_rows, item_live)
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values,
                                        type=to_arrow(target), mask=mask)
    return _leaf(node, arr, target, b, starts, rows, live)


def _map(entries: pa.StructArray, offsets: np.ndarray, counts: np.ndarray,
         out: pa.DataType, mask: pa.Array | None) -> pa.MapArray:
    """Each map's pairs in the order Spark gives a JSON object's keys: sorted (a variant
    object keeps its keys sorted). Spark compares UTF-16 code units, Arrow UTF-8 bytes:
    they agree unless a key holds a character from U+E000 on (UTF-8 lead byte EE and up).
    fastavro keeps the last of a repeated key; a repeat is not reproduced here."""
    first, end = int(offsets[0]), int(offsets[-1])
    keys, values = entries.field(0).slice(first, end - first), entries.field(1)
    data = keys.buffers()[2]
    if data is not None and (np.frombuffer(data, np.uint8) >= 0xEE).any():
        raise AvroUnsupported("a map key with a character from U+E000 on (Spark orders "
                              "them by UTF-16)")
    owner = pa.array(np.repeat(np.arange(len(counts)), counts))
    order = pc.sort_indices(pa.table({"o": owner, "k": keys}),
                            sort_keys=[("o", "ascending"), ("k", "ascending")])
    keys = keys.take(order)
    same = pc.and_(pc.equal(keys[1:], keys[:-1]),
                   pc.equal(owner.take(order)[1:], owner.take(order)[:-1])) \
        if len(keys) > 1 else pa.array([], pa.bool_())
    if pc.any(same).as_py():
        raise AvroUnsupported("a map with a repeated key")
    values = values.slice(first, end - first).take(order)
    return pa.MapArray.from_arrays(pa.array(offsets - first, pa.int32()), keys, values,
                                   type=out, mask=mask)


def _leaf(node: _Node, arr: pa.Array, target: JType, b: _Batch, starts: np.ndarray,
          rows: np.ndarray, live: np.ndarray) -> pa.Array:
    k, logical, out = node.kind, node.logical, to_arrow(target)
    if k == "boolean":
        byte = b.data[np.minimum(starts, len(b.data) - 1)]
        b.mark(byte > 1, rows, live)  # fastavro reads any non-zero byte as true
        return arr
    if k in ("int", "long"):
        v = _ints(arr)
        if logical == "date":
            b.mark((v < _MIN_DAY) | (v > _MAX_DAY), rows, live)
            days = np.clip(v, _MIN_DAY, _MAX_DAY).astype(np.int32)
            return pa.array(days, pa.int32(), mask=_nulls(arr)).cast(pa.date32())
        if logical is not None:  # a timestamp: fastavro builds a datetime of it
            lo, hi = (_MIN_US, _MAX_US) if "micros" in logical \
                else (-(-_MIN_US // 1000), _MAX_US // 1000)
            b.mark((v < lo) | (v > hi), rows, live)
            us = np.clip(v, lo, hi) * (1 if "micros" in logical else 1000)
            return pa.array(us, pa.timestamp("us", tz="UTC"), mask=_nulls(arr))
        if target.kind == INT:
            outside = (v < -(2 ** 31)) | (v >= 2 ** 31)
            if (outside & live).any():
                raise AvroUnsupported("an int beyond 32 bits for an int column")
            return pc.cast(arr, pa.int32(), safe=False)
        return pc.cast(arr, out, safe=False)  # long, or into a double as Spark's cast
    if k in ("float", "double"):
        finite = np.asarray(pc.fill_null(pc.is_finite(arr), True)
                            .to_numpy(zero_copy_only=False), bool)
        b.mark(~finite, rows, live, into=b.nan)
        # -0.0 lands as 0.0 (Spark reads the JSON number -0.0 as a decimal zero)
        return pc.cast(pc.add(arr, pa.scalar(0.0, arr.type)), out)
    if k == "enum":
        v = _ints(arr)
        b.mark((v < 0) | (v >= len(node.symbols)), rows, live)
        index = pa.array(np.clip(v, 0, max(len(node.symbols) - 1, 0)), mask=_nulls(arr))
        return pc.take(pa.array(node.symbols, pa.string()), index)
    if logical == "decimal":
        return _decimal_array(node, arr, target, b, rows, live)
    if k in ("bytes", "fixed"):
        import polars as pl

        return pc.cast(pl.Series("b", arr).bin.encode("base64").to_arrow(), pa.string())
    text = pc.cast(arr, pa.string())
    if logical == "uuid":  # fastavro rewrites it as str(UUID(text)): lower case, dashes
        canonical = pc.fill_null(pc.match_substring_regex(text, _UUID), True)
        b.mark(~np.asarray(canonical.to_numpy(zero_copy_only=False), bool), rows, live)
    return text


def _decimal_array(node: _Node, arr: pa.Array, target: JType, b: _Batch, rows: np.ndarray,
                   live: np.ndarray) -> pa.Array:
    """Big-endian two's complement unscaled values into decimal128, 16 bytes little-endian."""
    n = len(arr)
    lengths = _lengths(arr)
    b.mark(lengths > 16, rows, live)  # fastavro takes it; we do not widen past 128 bits
    flat = pc.fill_null(arr, b"").cast(pa.large_binary())
    joined, lengths = _joined(flat)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    data = np.frombuffer(joined, np.uint8)
    lengths = np.minimum(lengths, 16)
    negative = np.zeros(n, bool)
    has = lengths > 0
    negative[has] = data[offsets[:-1][has]] >= 0x80
    out = np.where(negative, 0xFF, 0)[:, None].astype(np.uint8).repeat(16, axis=1)
    for j in range(16):  # byte j from the end of each value is little-endian byte j
        take = lengths > j
        out[take, j] = data[offsets[1:][take] - 1 - j]
    raw = pa.Array.from_buffers(pa.decimal128(38, node.scale), n,
                                [arr.is_valid().buffers()[1] if arr.null_count else None,
                                 pa.py_buffer(out.tobytes())], null_count=arr.null_count)
    # fastavro rounds a value wider than the writer's precision: not reproduced
    limit = pa.scalar(10 ** node.precision, pa.decimal128(38, 0)).cast(
        pa.decimal128(38, node.scale), safe=False)
    wide = np.asarray(pc.fill_null(pc.greater_equal(pc.abs(raw), limit), False)
                      .to_numpy(zero_copy_only=False), bool)
    b.mark(wide, rows, live)
    return pc.if_else(pa.array(wide), pa.scalar(None, pa.decimal128(38, node.scale)), raw
                      ).cast(to_arrow(target))


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


def _as_arrow(bodies: Sequence[bytes] | pa.Array) -> pa.Array:
    """A binary or large binary array of the bodies (kept as it is when it is one)."""
    arr = bodies if isinstance(bodies, pa.Array) else pa.array(bodies, pa.large_binary())
    if arr.null_count:
        raise ValueError("a null body: only values are decoded here")
    if arr.type not in (pa.binary(), pa.large_binary()):
        arr = arr.cast(pa.large_binary())
    return arr


def _joined(arr: pa.Array) -> tuple[memoryview, np.ndarray]:
    """The bodies back to back (no copy: the array's own data), and each one's length."""
    width = np.int64 if arr.type in (pa.large_binary(), pa.large_string()) else np.int32
    offsets = np.frombuffer(arr.buffers()[1], width)[arr.offset:arr.offset + len(arr) + 1]
    offsets = offsets.astype(np.int64)
    data = arr.buffers()[2]
    joined = memoryview(b"" if data is None else data)[offsets[0]:offsets[-1]]
    return joined, np.diff(offsets)


class _Plan:
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

    def decode(self, values: Sequence[bytes] | pa.Array) -> tuple[pa.Table, dict[int, str]]:
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
                raise AvroUnsupported("the vectorised reader and fastavro disagree on "
                                      "this batch (a non-canonical encoding?)")
            keep = [i for i in range(len(bodies)) if i not in errors]
            table = self._block(bodies.take(pa.array(keep, pa.int64())))
            if table is None:
                raise AvroUnsupported("the vectorised reader refuses bodies fastavro takes")
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
        data, lengths = _joined(bodies)
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
        lay = _layout(self.node, record)
        if not np.array_equal(lay.sizes, lengths):
            return None
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        batch = _Batch(np.frombuffer(data, np.uint8), n)
        struct = _convert(lay, self.target, batch, starts, np.arange(n), np.ones(n, bool))
        assert isinstance(struct, pa.StructArray)
        table = pa.Table.from_arrays(
            [struct.field(i) for i in range(struct.type.num_fields)],
            schema=pa.schema([pa.field(name, to_arrow(t)) for name, t in self.target.fields]))
        return table, batch.suspect, batch.nan

    def target_empty(self) -> pa.Table:
        return pa.schema([pa.field(name, to_arrow(t)) for name, t in self.target.fields]
                         ).empty_table()


def decode_bodies(bodies: Sequence[bytes] | pa.Array, writer_schema: Any, target: JType, *,
                  references: Sequence[Any] = (), schema_id: int | None = None
                  ) -> tuple[pa.Table, dict[int, str]]:
    """Schemaless Avro bodies (framing stripped; a list or an Arrow binary array), all
    of `writer_schema` (parsed JSON; `references`: the parsed schemas it names), as a
    table of `target`'s columns (one row per good body, in order) and {index: reason}
    for the bodies that do not decode, in the words of registry_values.FramedDecoder (of
    schema `schema_id`) or, without an id, avro_values.AvroDecoder. Raises
    AvroUnsupported when the result would not be exactly what today's path lands.

    A lane decoding many batches of one schema keeps `plan(...)` and calls its decode."""
    return _Plan(writer_schema, target, references, schema_id).decode(bodies)


def plan(writer_schema: Any, target: JType, *, references: Sequence[Any] = (),
         schema_id: int | None = None) -> _Plan:
    """The schema checked once (AvroUnsupported if it cannot be done here), for decoding
    many batches with `.decode(bodies)`."""
    return _Plan(writer_schema, target, references, schema_id)
