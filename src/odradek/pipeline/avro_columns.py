"""The columns half of avro_arrow: polars' decoded arrays proven and turned into the
table's Arrow types.

`layout` computes each value's canonical Avro size (the proof that every body was read
from its own first byte to its last); `convert` walks the decoded arrays with each
value's first byte, its body and whether it is present, checks in place what the values
do not show (union indexes, booleans) and what fastavro would refuse or render otherwise
(dates past year 9999, enum indexes, non-canonical uuids, NaN), and builds the target's
arrays. Rows found wrong are marked on the `Batch`; avro_arrow asks fastavro about them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from odradek.pipeline.jsontypes import INT, STRING, STRUCT, JType, to_arrow


class AvroUnsupported(Exception):
    """This schema, target or batch cannot be decoded here exactly: use today's path."""


# Python's datetime range (fastavro builds datetimes and dates): years 1 to 9999.
_MIN_US, _MAX_US = -62_135_596_800_000_000, 253_402_300_799_999_999
_MIN_DAY, _MAX_DAY = -719_162, 2_932_896
_UUID = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
# A two-branch union's index byte → 1 (null branch) or 2 (value), by the null's position:
# 0 and 2 are the indexes 0 and 1; fastavro also takes 1 and 3, indexes -1 and -2 (from
# the end, as Python indexes a list).
_BRANCH = {0: np.zeros(256, np.int8), 1: np.zeros(256, np.int8)}
_BRANCH[0][[0, 3]], _BRANCH[0][[2, 1]] = 1, 2
_BRANCH[1][[2, 1]], _BRANCH[1][[0, 3]] = 1, 2


@dataclass(frozen=True)
class Node:
    """One writer type, reduced to what decoding and converting it needs."""

    kind: str  # boolean int long float double string bytes fixed enum record array nullable
    logical: str | None = None
    fields: tuple[tuple[str, Node], ...] = ()
    inner: Node | None = None  # array items; a nullable union's other branch
    null_index: int = 0  # nullable: the null branch's position in the union
    symbols: tuple[str, ...] = ()
    size: int = 0  # fixed
    precision: int = 0
    scale: int = 0


@functools.cache
def needs(node: Node) -> tuple[bool, bool]:
    """Whether checking this type needs each value's first byte (union indexes and
    booleans are checked in place), and whether it can find a row suspect at all."""
    if node.kind in ("nullable", "boolean"):
        return True, True
    kids = [needs(t) for _, t in node.fields] + ([needs(node.inner)] if node.inner else [])
    leaf = node.kind in ("enum", "float", "double") or node.logical is not None
    return any(k[0] for k in kids), leaf or any(k[1] for k in kids)


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


def value_lengths(arr: pa.Array) -> np.ndarray:
    if arr.type in (pa.large_binary(), pa.large_string()):  # polars' own: offsets at hand
        offsets = np.frombuffer(arr.buffers()[1], np.int64)
        return np.diff(offsets[arr.offset:arr.offset + len(arr) + 1])
    return _ints(pc.binary_length(arr))


@dataclass
class Layout:
    """A decoded array with each element's canonical Avro size, and its children's."""

    node: Node
    arr: pa.Array
    sizes: np.ndarray
    kids: list[Layout]


def layout(node: Node, arr: pa.Array) -> Layout:
    n = len(arr)
    k = node.kind
    if k == "nullable":
        assert node.inner is not None
        kid = layout(node.inner, arr)
        valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), bool)
        return Layout(node, arr, 1 + np.where(valid, kid.sizes, 0), [kid])
    if k in ("int", "long", "enum"):
        return Layout(node, arr, _varint_size(_zigzag(_ints(arr))), [])
    if k in ("string", "bytes"):
        lengths = value_lengths(arr)
        return Layout(node, arr, _varint_size((lengths * 2).view(np.uint64)) + lengths, [])
    fixed = {"boolean": 1, "float": 4, "double": 8, "fixed": node.size}
    if k in fixed:
        return Layout(node, arr, np.full(n, fixed[k], np.int64), [])
    if k == "record":
        kids = [layout(t, arr.field(i)) for i, (_, t) in enumerate(node.fields)]
        sizes = np.zeros(n, np.int64)
        for kid in kids:
            sizes += kid.sizes
        return Layout(node, arr, sizes, kids)
    assert k in ("array", "map") and node.inner is not None
    kid = layout(node.inner, arr.values)
    offsets = np.asarray(arr.offsets.to_numpy(), np.int64)
    counts = np.diff(offsets)
    running = np.concatenate([[0], np.cumsum(kid.sizes)])
    inside = running[offsets[1:]] - running[offsets[:-1]]
    # one block (its count, the items, the 0 that ends it), or the lone 0 of an empty one
    sizes = np.where(counts > 0, _varint_size((counts * 2).view(np.uint64)) + inside + 1, 1)
    return Layout(node, arr, sizes, [kid])


# ---- conversion into the target, with checks -----------------------------------------

class Batch:
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


def convert(lay: Layout, target: JType, b: Batch, starts: np.ndarray, rows: np.ndarray,
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
        return convert(lay.kids[0], target, b, starts + 1, rows, live & valid)
    if k == "record":
        mine = {name: i for i, (name, _) in enumerate(node.fields)}
        offset = starts
        kid_starts = []
        for kid in lay.kids:
            kid_starts.append(offset)
            if needs(node)[0]:
                offset = offset + kid.sizes
        children = []
        for name, sub in target.fields:
            i = mine.get(name, -1)
            children.append(pa.nulls(len(arr), to_arrow(sub)) if i < 0 else
                            convert(lay.kids[i], sub, b, kid_starts[i], rows, live))
        mask = pc.invert(arr.is_valid()) if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(to_arrow(target)), mask=mask)
    if k in ("array", "map"):
        assert target.element is not None
        offsets = np.asarray(arr.offsets.to_numpy(), np.int64)
        counts = np.diff(offsets)
        kid = lay.kids[0]
        n_items = len(kid.arr)
        need_starts, need_rows = needs(kid.node)
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
            entries = convert(kid, pairs, b, item_starts, item_rows, item_live)
            return _map(entries, offsets, counts, to_arrow(target), mask)
        values = convert(kid, target.element, b, item_starts, item_rows, item_live)
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


def _leaf(node: Node, arr: pa.Array, target: JType, b: Batch, starts: np.ndarray,
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
        if logical in ("time-millis", "time-micros"):
            return _time_text(v, logical, arr, b, rows, live)
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


def _time_text(v: np.ndarray, logical: str, arr: pa.Array, b: Batch, rows: np.ndarray,
               live: np.ndarray) -> pa.Array:
    """The text of fastavro's datetime.time, isoformat(): HH:MM:SS, then .ffffff unless
    the microseconds are 0. A value past the day fastavro refuses; a negative one it
    reads as a wrapped time of its own: both rows are suspect."""
    unit = 1000 if logical == "time-millis" else 1
    day = 86_400_000_000 // unit
    b.mark((v < 0) | (v >= day), rows, live)
    hours, rest = np.divmod(np.clip(v, 0, day - 1) * unit, 3_600_000_000)
    minutes, rest = np.divmod(rest, 60_000_000)
    seconds, micros = np.divmod(rest, 1_000_000)

    def digits(x: np.ndarray, width: int) -> pa.Array:
        return pc.utf8_lpad(pa.array(x).cast(pa.string()), width, "0")

    text = pc.binary_join_element_wise(digits(hours, 2), digits(minutes, 2),
                                       digits(seconds, 2), ":")
    text = pc.if_else(pa.array(micros != 0),
                      pc.binary_join_element_wise(text, digits(micros, 6), "."), text)
    return pc.if_else(arr.is_valid(), text, pa.scalar(None, pa.string()))


def _decimal_array(node: Node, arr: pa.Array, target: JType, b: Batch, rows: np.ndarray,
                   live: np.ndarray) -> pa.Array:
    """Big-endian two's complement unscaled values into decimal128, 16 bytes little-endian."""
    n = len(arr)
    lengths = value_lengths(arr)
    b.mark(lengths > 16, rows, live)  # fastavro takes it; we do not widen past 128 bits
    flat = pc.fill_null(arr, b"").cast(pa.large_binary())
    joined, lengths = joined_values(flat)
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
    # fastavro rounds an unscaled value of more digits than the writer's precision: such a
    # row is not reproduced (nor is one past 128 bits)
    wide = _digits_over(out, node.precision)
    b.mark(wide, rows, live)
    out[wide] = 0
    raw = pa.Array.from_buffers(pa.decimal128(38, node.scale), n,
                                [arr.is_valid().buffers()[1] if arr.null_count else None,
                                 pa.py_buffer(out.tobytes())], null_count=arr.null_count)
    return raw.cast(to_arrow(target))


def _digits_over(le: np.ndarray, precision: int) -> np.ndarray:
    """Which 128-bit two's complement values (rows of 16 little-endian bytes) have an
    absolute value of 10 ** precision or more."""
    lo = le[:, :8].copy().view(np.uint64)[:, 0]
    hi = le[:, 8:].copy().view(np.int64)[:, 0]
    negative = hi < 0
    # |v| of a negative v: two's complement negation over the (hi, lo) pair
    neg_lo = ~lo + np.uint64(1)
    neg_hi = (~hi).view(np.uint64) + (neg_lo == 0).astype(np.uint64)
    abs_lo = np.where(negative, neg_lo, lo)
    abs_hi = np.where(negative, neg_hi, hi.view(np.uint64))
    limit = 10 ** precision
    limit_hi, limit_lo = np.uint64(limit >> 64), np.uint64(limit & (2 ** 64 - 1))
    # -2**127 negates to itself: its hi reads as 2**63 unsigned, past any 38-digit limit
    over: np.ndarray = (abs_hi > limit_hi) | ((abs_hi == limit_hi) & (abs_lo >= limit_lo))
    return over


def joined_values(arr: pa.Array) -> tuple[memoryview, np.ndarray]:
    """The bodies back to back (no copy: the array's own data), and each one's length."""
    width = np.int64 if arr.type in (pa.large_binary(), pa.large_string()) else np.int32
    offsets = np.frombuffer(arr.buffers()[1], width)[arr.offset:arr.offset + len(arr) + 1]
    offsets = offsets.astype(np.int64)
    data = arr.buffers()[2]
    joined = memoryview(b"" if data is None else data)[offsets[0]:offsets[-1]]
    return joined, np.diff(offsets)
