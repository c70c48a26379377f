"""A request's lengths and counts checked against the bytes that are really there.

kio's native reader reserves room for an array's elements from the count on the wire
before reading them: a 40-byte frame claiming 2^31 topics makes it ask for 16 GiB,
which aborts the process where address space is limited. So before kio sees a body,
this walk reads only the lengths — every array count, string and bytes length — and
refuses one that exceeds what is left of the frame (each element takes at least one
byte). The walk for each request class is compiled once from kio's field metadata.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import fields
from functools import cache
from typing import Any

from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, is_optional
from kio.serial._introspect import classify_field as _classify

from odradek.protocol.errors import InvalidRequest

Walk = Callable[[Any, int, int], int]  # (buffer, position, end) -> position after

_FIXED = {
    "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "uint16": 2, "uint32": 4,
    "uint64": 8, "float64": 8, "bool": 1, "uuid": 16, "error_code": 2,
    "timedelta_i32": 4, "timedelta_i64": 8, "datetime_i32": 4, "datetime_i64": 8,
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def check(cls: type, buf: Any, offset: int) -> None:
    """Raise InvalidRequest if a length or count in `buf[offset:]` cannot be right."""
    try:
        _walker(cls)(buf, offset, len(buf))
    except (IndexError, struct.error):
        raise InvalidRequest(f"truncated {cls.__name__}") from None


def _refuse(what: str, n: int, left: int) -> InvalidRequest:
    return InvalidRequest(f"{what} of {n} with only {left} bytes left in the request")


def _uvarint(buf: Any, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 35:
            raise InvalidRequest("varint longer than five bytes")


def _length(buf: Any, pos: int, end: int, compact: bool, wide: bool, what: str
            ) -> tuple[int, int]:
    """A length or count (-1 or 0-compact: null), checked against the bytes left."""
    if compact:
        n, pos = _uvarint(buf, pos)
        n -= 1
    elif wide:
        n, = _I32.unpack_from(buf, pos)
        pos += 4
    else:
        n, = _I16.unpack_from(buf, pos)
        pos += 2
    if n < -1:
        raise InvalidRequest(f"negative {what} {n}")
    if n > end - pos:
        raise _refuse(what, n, end - pos)
    return n, pos


def _skip_tagged(buf: Any, pos: int, end: int) -> int:
    count, pos = _uvarint(buf, pos)
    if count > end - pos:
        raise _refuse("tagged field count", count, end - pos)
    for _ in range(count):
        _tag, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        if size > end - pos:
            raise _refuse("tagged field", size, end - pos)
        pos += size
    return pos


def _primitive(kafka_type: str, compact: bool) -> Walk:
    size = _FIXED.get(kafka_type)
    if size is not None:
        return lambda buf, pos, end: pos + size
    if kafka_type in ("string", "bytes", "records"):
        wide = kafka_type != "string"

        def var(buf: Any, pos: int, end: int) -> int:
            n, pos = _length(buf, pos, end, compact, wide, kafka_type + " length")
            return pos + max(n, 0)

        return var
    if kafka_type in ("uvarint", "varint", "uvarlong", "varlong"):
        return lambda buf, pos, end: _uvarint(buf, pos)[1]
    raise TypeError(f"unknown kafka_type {kafka_type}")


def _array(item: Walk, compact: bool, what: str) -> Walk:
    def walk(buf: Any, pos: int, end: int) -> int:
        n, pos = _length(buf, pos, end, compact, True, what)
        for _ in range(n):
            pos = item(buf, pos, end)
        return pos

    return walk


@cache
def _walker(cls: type) -> Walk:
    compact = bool(getattr(cls, "__flexible__", False))
    steps: list[Walk] = []
    for f in fields(cls):
        if "tag" in f.metadata:
            continue  # tagged fields live in the tagged section at the end
        kind = _classify(f)
        what = f"{cls.__name__}.{f.name} count"
        if isinstance(kind, EntityTupleField):
            steps.append(_array(_entity(kind.type_), compact, what))
        elif isinstance(kind, EntityField):
            walk_entity = _entity(kind.type_)
            steps.append(_nullable(walk_entity) if is_optional(f) else walk_entity)
        elif isinstance(kind, PrimitiveTupleField):
            steps.append(_array(_primitive(f.metadata["kafka_type"], compact), compact, what))
        else:
            steps.append(_primitive(f.metadata["kafka_type"], compact))

    def walk(buf: Any, pos: int, end: int) -> int:
        for step in steps:
            pos = step(buf, pos, end)
        if compact:
            pos = _skip_tagged(buf, pos, end)
        if pos > end:
            raise InvalidRequest(f"truncated {cls.__name__}")
        return pos

    return walk


def _nullable(walk: Walk) -> Walk:
    """A nullable struct (DescribeTopicPartitions' cursor): an int8 marker, -1 for null."""
    def step(buf: Any, pos: int, end: int) -> int:
        return pos + 1 if buf[pos] == 0xFF else walk(buf, pos + 1, end)

    return step


def _entity(cls: type) -> Walk:
    # resolved lazily: entities may refer to each other
    return lambda buf, pos, end: _walker(cls)(buf, pos, end)
