"""A registered schema (Avro, JSON Schema, Protobuf) as the lake's column types.

The lake writer takes a batch's types from the registered schemas of the ids it holds,
not from the JSON it decoded them to: a column exists (with its declared type) even when
no record of the batch has a value for it, a timestamp is a timestamp, an int an int.
The target is the lake's type language (`jsontypes.JType`), which the writer turns into
Iceberg types. The conventions:

- record / object / message: a struct, nested as declared;
- a union with null (`["null", T]`, `"type": [T, "null"]`, proto3 `optional`): T (every
  column is optional);
- any other union: a struct of options, one field per branch named by its type
  (Confluent's Connect naming: `string`, `long`, a record's own name); the branch a
  value took is set, the others are null;
- enum: string (the symbol); array / repeated: list;
- map, an object with only `additionalProperties`, a proto `map<k, v>`: map (string keys;
  a proto map's integer or boolean keys are strings in its JSON form too);
- int, long / integer / int32, int64…: int, long; float, double / number: float, double;
- decimal (on bytes or fixed): decimal(precision, scale), as Iceberg's (precision at most
  38; a larger one has no decimal column and lands as double);
- timestamp-millis/micros, local-timestamp-* / `format: date-time` /
  google.protobuf.Timestamp: timestamp;
- date / `format: date`: date;
- time-*, uuid, bytes and fixed (base64): string.

Decoded values reach the lake as JSON text: a map is an object, a date its ISO text and
a decimal its exact digits as text (registry_values), which the load casts into the
declared column. A schema with no
column form (a recursive type) leaves the batch to inference. Pure: no Spark, no I/O.
"""

from __future__ import annotations

import json
from typing import Any

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
    decimal,
)

_AVRO_PRIMITIVES = {"null": STRING, "boolean": BOOLEAN, "int": INT, "long": LONG,
                    "float": FLOAT, "double": DOUBLE, "bytes": STRING, "string": STRING}
_AVRO_TIMESTAMPS = ("timestamp-millis", "timestamp-micros", "timestamp-nanos",
                    "local-timestamp-millis", "local-timestamp-micros")


class UnsupportedSchema(ValueError):
    pass


def avro_type(schema: Any, named: dict[str, Any] | None = None) -> JType:
    """The column type of an Avro schema (parsed JSON); `named` holds the named types
    seen so far (and those of references), by full and short name."""
    named = {} if named is None else named
    return _Avro(named).type(schema, "")


def union_branch_name(branch: Any) -> str:
    """The struct field a non-null union branch becomes: its type's name, no namespace."""
    if isinstance(branch, str):
        return branch.rsplit(".", 1)[-1]
    if isinstance(branch, dict):
        name = branch.get("name")
        if isinstance(name, str):
            return name.rsplit(".", 1)[-1]
        return str(branch.get("logicalType") or branch.get("type"))
    raise UnsupportedSchema(f"not an Avro type: {branch!r}")


def _avro_decimal(schema: dict[str, Any]) -> JType:
    precision, scale = schema.get("precision"), schema.get("scale", 0)
    if not isinstance(precision, int) or not isinstance(scale, int):
        raise UnsupportedSchema(f"decimal without an integer precision and scale: {schema}")
    if precision > 38:
        return JType(DOUBLE)  # Iceberg's decimals stop at 38 digits
    try:
        return decimal(precision, scale)
    except ValueError as e:
        raise UnsupportedSchema(str(e)) from e


class _Avro:
    def __init__(self, named: dict[str, Any]) -> None:
        self.named = named
        self.open: set[str] = set()  # records being mapped: a recursive one is refused

    def type(self, schema: Any, namespace: str) -> JType:
        if isinstance(schema, list):
            return self.union(schema, namespace)
        if isinstance(schema, str):
            if schema in _AVRO_PRIMITIVES:
                return JType(_AVRO_PRIMITIVES[schema])
            full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
            for name in (full, schema):
                if name in self.named:
                    if name in self.open:
                        raise UnsupportedSchema(f"recursive type {name} has no column form")
                    return self.named_type(self.named[name], name)
            raise UnsupportedSchema(f"unknown Avro type {schema}")
        if not isinstance(schema, dict):
            raise UnsupportedSchema(f"not an Avro type: {schema!r}")
        logical, kind = schema.get("logicalType"), schema.get("type")
        if logical in _AVRO_TIMESTAMPS and kind == "long":
            return JType(TIMESTAMP)
        if logical in ("date", "time-millis", "time-micros", "uuid", "decimal") \
                and kind in ("int", "long", "bytes", "fixed", "string"):
            if kind == "fixed":
                self.register(schema, namespace)
            if logical == "decimal":
                return _avro_decimal(schema)
            return JType(DATE if logical == "date" and kind == "int" else STRING)
        if kind in ("record", "error", "enum", "fixed"):
            return self.named_type(schema, self.register(schema, namespace))
        if kind == "array":
            return JType(LIST, element=self.type(schema.get("items"), namespace))
        if kind == "map":
            return JType(MAP, element=self.type(schema.get("values"), namespace))
        return self.type(kind, namespace)

    def register(self, schema: dict[str, Any], namespace: str) -> str:
        name = str(schema.get("name"))
        space = schema.get("namespace", namespace) if "." not in name else ""
        full = f"{space}.{name}" if space else name
        self.named[full] = schema
        self.named.setdefault(name, schema)
        return full

    def named_type(self, schema: dict[str, Any], full: str) -> JType:
        kind = schema.get("type")
        if kind in ("enum", "fixed"):
            return JType(STRING)
        space = full.rsplit(".", 1)[0] if "." in full else ""
        self.open.add(full)
        try:
            return JType(STRUCT, tuple((str(f["name"]), self.type(f["type"], space))
                                       for f in schema.get("fields", [])))
        finally:
            self.open.discard(full)

    def union(self, branches: list[Any], namespace: str) -> JType:
        others = [b for b in branches if b != "null" and not
                  (isinstance(b, dict) and b.get("type") == "null")]
        if len(others) == 1:
            return self.type(others[0], namespace)
        if not others:
            return JType(STRING)
        return JType(STRUCT, tuple((union_branch_name(b), self.type(b, namespace))
                                   for b in others))


def has_complex_union(schema: Any) -> bool:
    """Whether decoded values need their union branches tagged (a non-null union)."""
    if isinstance(schema, list):
        others = [b for b in schema if b != "null"]
        return len(others) > 1 or any(has_complex_union(b) for b in others)
    if isinstance(schema, dict):
        return any(has_complex_union(v) for k, v in schema.items()
                   if k in ("type", "items", "values")) or any(
            has_complex_union(f.get("type")) for f in schema.get("fields", [])
            if isinstance(f, dict))
    return False


def tag_unions(value: Any, schema: Any, named: dict[str, Any]) -> Any:
    """A decoded value with each value of a union of several types as a one-key object
    naming its branch, so it lands in that branch's field of the union's struct.

    fastavro returns a union's value bare; its branch is told from the value's Python
    type, as fastavro's writer picks one (records by name: read with
    return_record_name=True, which gives `(name, record)` pairs)."""
    if isinstance(schema, list):
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
            name, inner = value
            branch: Any = _named(name, named) or name
        else:
            inner = value
            branch = None
        others = [b for b in schema if b != "null"]
        if inner is None:
            return None
        if branch is None:
            branch = others[0] if len(others) == 1 else _branch_of(inner, others, named)
        tagged = tag_unions(inner, branch, named)
        return tagged if len(others) == 1 else {union_branch_name(branch): tagged}
    if isinstance(schema, str):
        target = _named(schema, named)
        return value if target is None else tag_unions(value, target, named)
    if not isinstance(schema, dict):
        return value
    kind = schema.get("type")
    if kind in ("record", "error") and isinstance(value, dict):
        return {f["name"]: tag_unions(value.get(f["name"]), f["type"], named)
                for f in schema.get("fields", [])}
    if kind == "array" and isinstance(value, list):
        return [tag_unions(v, schema.get("items"), named) for v in value]
    if kind == "map" and isinstance(value, dict):
        return {k: tag_unions(v, schema.get("values"), named) for k, v in value.items()}
    if isinstance(kind, list | str) and kind not in _AVRO_PRIMITIVES:
        return tag_unions(value, kind, named)
    return value


def _named(name: str, named: dict[str, Any]) -> Any:
    return named.get(name) or named.get(name.rsplit(".", 1)[-1])


_PYTHON_KINDS: dict[type, tuple[str, ...]] = {
    bool: ("boolean",), int: ("int", "long"), float: ("float", "double"),
    str: ("string", "enum"), bytes: ("bytes", "fixed"), list: ("array",),
    dict: ("record", "map")}


def _branch_of(value: Any, branches: list[Any], named: dict[str, Any]) -> Any:
    import datetime as dt
    import decimal
    import uuid

    def kind(b: Any) -> tuple[str, str | None]:
        if isinstance(b, str) and b not in _AVRO_PRIMITIVES:
            b = _named(b, named) or {"type": b}
        if isinstance(b, dict):
            return str(b.get("type")), b.get("logicalType")
        return str(b), None

    wanted: tuple[str, ...]
    logical: tuple[str, ...] = ()
    if isinstance(value, dt.datetime):
        wanted, logical = ("long",), _AVRO_TIMESTAMPS
    elif isinstance(value, dt.date):
        wanted, logical = ("int",), ("date",)
    elif isinstance(value, dt.time):
        wanted, logical = ("int", "long"), ("time-millis", "time-micros")
    elif isinstance(value, decimal.Decimal):
        wanted, logical = ("bytes", "fixed"), ("decimal",)
    elif isinstance(value, uuid.UUID):
        wanted, logical = ("string", "fixed"), ("uuid",)
    else:
        wanted = _PYTHON_KINDS.get(type(value), ())
    for b in branches:
        k, lt = kind(b)
        if k in wanted and (lt in logical if logical else lt is None or k == "string"):
            return b
    raise ValueError(f"no branch of union {branches} holds {type(value).__name__}")


# ---- JSON Schema ---------------------------------------------------------------------

def json_schema_type(schema: Any) -> JType:
    """The column type of a JSON Schema document (draft-07 or 2020-12); local `$ref`s
    (`#/definitions/…`, `#/$defs/…`) are followed, a recursive one is refused."""
    return _Json(schema).type(schema, ())


class _Json:
    def __init__(self, root: Any) -> None:
        self.root = root

    def resolve(self, ref: str, seen: tuple[str, ...]) -> tuple[Any, tuple[str, ...]]:
        if not ref.startswith("#"):
            raise UnsupportedSchema(f"$ref {ref} is not in the schema")
        if ref in seen:
            raise UnsupportedSchema(f"recursive $ref {ref} has no column form")
        node = self.root
        for part in filter(None, ref[1:].split("/")):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node, (*seen, ref)

    def type(self, schema: Any, seen: tuple[str, ...]) -> JType:
        if schema is True or schema == {} or not isinstance(schema, dict):
            return JType(STRING)  # anything: kept as text
        if "$ref" in schema:
            target, seen = self.resolve(str(schema["$ref"]), seen)
            return self.type(target, seen)
        for key in ("oneOf", "anyOf"):
            if key in schema:
                branches = [b for b in schema[key]
                            if not (isinstance(b, dict) and b.get("type") == "null")]
                return self.type(branches[0], seen) if len(branches) == 1 else JType(STRING)
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            kind = kinds[0] if len(kinds) == 1 else None
        if kind is None and "properties" in schema:
            kind = "object"
        if "enum" in schema or "const" in schema:
            return JType(STRING) if kind in (None, "string") else self.type(
                {"type": kind}, seen)
        if kind == "object":
            props = schema.get("properties") or {}
            if not props:
                extra = schema.get("additionalProperties", True)
                if extra is False:
                    return JType(STRING)  # an object that holds nothing
                return JType(MAP, element=self.type(extra, seen))
            return JType(STRUCT, tuple((str(n), self.type(s, seen)) for n, s in props.items()))
        if kind == "array":
            return JType(LIST, element=self.type(schema.get("items", True), seen))
        if kind == "integer":
            return JType(LONG)
        if kind == "number":
            return JType(DOUBLE)
        if kind == "boolean":
            return JType(BOOLEAN)
        if kind == "string" and schema.get("format") == "date-time":
            return JType(TIMESTAMP)
        if kind == "string" and schema.get("format") == "date":
            return JType(DATE)
        return JType(STRING)


# ---- Protobuf ------------------------------------------------------------------------

_PROTO_SCALARS = {1: DOUBLE, 2: FLOAT, 3: LONG, 4: LONG, 5: INT, 6: LONG, 7: INT, 8: BOOLEAN,
                  9: STRING, 12: STRING, 13: LONG, 15: INT, 16: LONG, 17: INT, 18: LONG}
_TYPE_MESSAGE, _TYPE_ENUM, _TYPE_GROUP = 11, 14, 10
_REPEATED = 3


def protobuf_type(descriptor: Any) -> JType:
    """The column type of a message (a protobuf `Descriptor`, as the decoder's pool has
    it). uint32 is a long: its values pass int's range."""
    return _proto(descriptor, ())


def _proto(message: Any, open_: tuple[str, ...]) -> JType:
    if message.full_name == "google.protobuf.Timestamp":
        return JType(TIMESTAMP)
    if message.full_name in open_:
        raise UnsupportedSchema(f"recursive message {message.full_name} has no column form")
    fields = []
    for f in message.fields:
        if f.type in (_TYPE_MESSAGE, _TYPE_GROUP) and f.message_type.GetOptions().map_entry:
            value = f.message_type.fields_by_name["value"]
            fields.append((f.name, JType(MAP, element=_proto_field(value, message, open_))))
            continue
        t = _proto_field(f, message, open_)
        repeated = getattr(f, "is_repeated", None)
        if repeated is None:
            repeated = f.label == _REPEATED
        fields.append((f.name, JType(LIST, element=t) if repeated else t))
    return JType(STRUCT, tuple(fields))


def _proto_field(f: Any, message: Any, open_: tuple[str, ...]) -> JType:
    """One field's (or a map's values') type, repeated or not."""
    if f.type in (_TYPE_MESSAGE, _TYPE_GROUP):
        return _proto(f.message_type, (*open_, message.full_name))
    if f.type == _TYPE_ENUM:
        return JType(STRING)
    return JType(_PROTO_SCALARS.get(f.type, STRING))


# ---- several versions in one batch ----------------------------------------------------

def merge_declared(types: list[JType]) -> JType | None:
    """The types of several registered versions as one: fields in first-seen order, a
    later version's new fields added (compatible versions only add or drop fields)."""
    merged: JType | None = None
    for t in types:
        merged = t if merged is None else _merge(merged, t)
    return merged


def _merge(a: JType, b: JType) -> JType:
    if a.kind == STRUCT and b.kind == STRUCT:
        fields = dict(a.fields)
        for name, t in b.fields:
            fields[name] = _merge(fields[name], t) if name in fields else t
        return JType(STRUCT, tuple(fields.items()))
    if a.kind == b.kind and a.kind in (LIST, MAP) and a.element is not None \
            and b.element is not None:
        return JType(a.kind, element=_merge(a.element, b.element))
    if a.kind == DECIMAL and b.kind == DECIMAL and a.scale == b.scale:
        return a if a.precision >= b.precision else b  # a compatible change widens
    return a if a == b else _wider(a, b)


def _wider(a: JType, b: JType) -> JType:
    order = [INT, LONG, FLOAT, DOUBLE]
    if a.kind in order and b.kind in order:
        return a if order.index(a.kind) >= order.index(b.kind) else b
    return JType(STRING)


def declared_type(schema_type: str, schema: str, named: dict[str, Any] | None = None
                  ) -> JType:
    """The column type of a registered schema's text (Avro or JSON Schema)."""
    if schema_type == "AVRO":
        return avro_type(json.loads(schema), named)
    if schema_type == "JSON":
        return json_schema_type(json.loads(schema))
    raise UnsupportedSchema(f"{schema_type}: map it from its descriptor (protobuf_type)")


def avro_names(schemas: list[Any]) -> dict[str, Any]:
    """Every named type (record, enum, fixed) in these schemas, by full and short name."""
    named: dict[str, Any] = {}

    def walk(schema: Any, namespace: str) -> None:
        if isinstance(schema, list):
            for b in schema:
                walk(b, namespace)
        elif isinstance(schema, dict):
            kind = schema.get("type")
            if kind in ("record", "error", "enum", "fixed") and "name" in schema:
                name = str(schema["name"])
                space = schema.get("namespace", namespace) if "." not in name else ""
                full = f"{space}.{name}" if space else name
                named[full] = schema
                named.setdefault(name.rsplit(".", 1)[-1], schema)
                namespace = full.rsplit(".", 1)[0] if "." in full else ""
            for f in schema.get("fields", []):
                if isinstance(f, dict):
                    walk(f.get("type"), namespace)
            for key in ("items", "values"):
                if key in schema:
                    walk(schema[key], namespace)
            if isinstance(kind, dict | list):
                walk(kind, namespace)

    for s in schemas:
        walk(s, "")
    return named
