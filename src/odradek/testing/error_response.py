"""The response a broker sends when a whole request fails with one error, for any API
and version, built from kio's response schema and the request itself.

Kafka writes one `getErrorResponse` per request class; they all do the same thing:
every error field of the response carries the error, and every topic and partition the
request named comes back, with its name, id or index, carrying the error too. The
other fields say "unknown" as Kafka's do: -1 for offsets, epochs, ids and times, empty
strings, null where the field is nullable. Doing that generically over the schemas
keeps every API and version correct, including ones added to kio later.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from collections.abc import Iterable
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.protocol.messages import Message, response_class

# Fields that identify a topic, a partition, a group, … in a request and its response;
# Kafka's schemas name the same thing differently on the two sides (Fetch's request
# says `partition`, its response `partition_index`).
_ID_GROUPS: tuple[frozenset[str], ...] = (
    frozenset({"name", "topic", "topic_name"}),
    frozenset({"topic_id"}),
    frozenset({"index", "partition_index", "partition"}),
    frozenset({"group_id"}),
    frozenset({"key"}),
    frozenset({"transactional_id"}),
    frozenset({"member_id"}),
    frozenset({"group_instance_id"}),
    frozenset({"resource_name"}),
    frozenset({"resource_type"}),
    frozenset({"producer_id"}),
)
_ID_OF = {name: group for group in _ID_GROUPS for name in group}
# Integers that mean "unknown" at -1 in Kafka's error responses.
_MINUS_ONE_HINTS = ("offset", "watermark", "epoch", "generation", "_id", "timestamp", "port",
                    "leader", "time_ms", "node")


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    kind: str  # error, int, float, bool, str, bytes, uuid, timedelta, datetime, list, entity
    nullable: bool
    element: type | None  # the entity class of a list or struct field
    default: Any  # dataclasses.MISSING when the schema gives none


def error_response(api_key: int, version: int, request: Message | None,
                   error: ErrorCode) -> Message:
    """The response to `request` (decoded at `version`) that fails it with `error`."""
    return _build(response_class(api_key, version), request, error)


def _build(cls: type, source: Any, error: ErrorCode) -> Any:
    values: dict[str, Any] = {}
    for f in _fields(cls):
        values[f.name] = _value(f, source, error)
    return cls(**values)


def _value(f: _Field, source: Any, error: ErrorCode) -> Any:
    if f.kind == "error":
        return error
    if f.name in _ID_OF and source is not None:
        copied = _copy_id(f, source)
        if copied is not dataclasses.MISSING:
            return copied
    if f.kind == "list":
        assert f.element is not None
        return tuple(_mirror(f.element, source, error))
    if f.kind == "entity":
        if f.nullable:
            return None
        assert f.element is not None
        return _build(f.element, None, error)
    if f.name == "error_message":
        return None
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.nullable:
        return None
    return _unknown(f)


def _unknown(f: _Field) -> Any:
    if f.kind == "int":
        return -1 if any(h in f.name for h in _MINUS_ONE_HINTS) else 0
    return {
        "float": 0.0, "bool": False, "str": "", "bytes": b"", "uuid": uuid.UUID(int=0),
        "timedelta": datetime.timedelta(0),
        "datetime": datetime.datetime.fromtimestamp(0, tz=datetime.UTC),
    }.get(f.kind)


def _copy_id(f: _Field, source: Any) -> Any:
    """The request's value of the same identity (its name may differ)."""
    if _is_plain(source):
        return source  # an element of a request's list of plain names or indexes
    names = set(_attrs(source))
    for name in (f.name, *sorted(_ID_OF[f.name] - {f.name})):
        if name in names:
            return getattr(source, name)
    return dataclasses.MISSING


def _is_plain(value: Any) -> bool:
    return isinstance(value, (str, int, uuid.UUID)) and not isinstance(value, bool)


def _is_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and not hasattr(value, "_fields")


def _attrs(obj: Any) -> tuple[str, ...]:
    """Field names of a request part: kio's dataclasses or the hand-written decoders'
    named tuples and slotted classes (protocol/produce_request.py)."""
    if dataclasses.is_dataclass(obj):
        return tuple(f.name for f in dataclasses.fields(obj))
    if hasattr(obj, "_fields"):
        return tuple(obj._fields)
    return tuple(getattr(obj, "__slots__", ()))


def _mirror(element: type, source: Any, error: ErrorCode) -> Iterable[Any]:
    """One response entity per element of the request list that names the same things."""
    if source is None or _is_plain(source):
        return ()
    wanted = {_ID_OF[f.name] for f in _fields(element) if f.name in _ID_OF}
    if not wanted:
        return ()
    best: tuple[float, Any] = (0.0, None)
    for name in _attrs(source):
        items = getattr(source, name)
        if not _is_list(items) or not items:
            continue
        first = items[0]
        if _is_plain(first):  # a list of plain names or indexes: fills the entity's one id
            score = 0.5 if len(wanted) == 1 else 0.0
        else:
            have = {_ID_OF[a] for a in _attrs(first) if a in _ID_OF}
            score = float(len(wanted & have))
        if score > best[0]:
            best = (score, items)
    if best[1] is None:
        return ()
    return [_build(element, item, error) for item in best[1]]


@cache
def _fields(cls: type) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        out.append(_describe(f, hints[f.name]))
    return tuple(out)


def _describe(f: dataclasses.Field[Any], hint: Any) -> _Field:
    nullable = False
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        nullable = type(None) in args
        hint = next(a for a in args if a is not type(None))
        args = typing.get_args(hint)
    default = f.default
    kafka_type = f.metadata.get("kafka_type", "")
    element: type | None = None
    if typing.get_origin(hint) is tuple:
        kind = "list"
        first = args[0] if args else None
        element = first if isinstance(first, type) and dataclasses.is_dataclass(first) else None
        if element is None:
            kind = "other"  # a list of plain values: empty
            default = ()
    elif dataclasses.is_dataclass(hint):
        kind, element = "entity", hint  # type: ignore[assignment]
    elif kafka_type == "error_code" or hint is ErrorCode:
        kind = "error"
    elif kafka_type.startswith("timedelta"):
        kind = "timedelta"
    elif kafka_type.startswith("datetime"):
        kind = "datetime"
    elif kafka_type.startswith(("int", "uint")):
        kind = "int"
    elif kafka_type == "float64":
        kind = "float"
    elif kafka_type == "bool":
        kind = "bool"
    elif kafka_type == "string":
        kind = "str"
    elif kafka_type in ("bytes", "records"):
        kind = "bytes"
    elif kafka_type == "uuid":
        kind = "uuid"
    else:
        kind = "other"
    return _Field(f.name, kind, nullable, element, default)
