"""The types JSON data has, as the lake sees them, and how Spark's variant schemas map to them.

Spark's `schema_of_variant_agg` describes a batch of JSON objects as a type string such as
`OBJECT<a: BIGINT, b: DECIMAL(3,1), `odd name`: ARRAY<STRING>>`. This module parses that
string into `JType` values, the small type language the lake's schema logic works in, and
renders them as Spark DDL, Arrow and Iceberg-compatible types. Pure; no Spark needed.

Map, date and decimal columns come only from registered schemas (schema_mapping) or a
table's own columns: inference of plain JSON never makes them (a JSON object is a struct,
a date text, a decimal number a double), so the JSON path is as it was.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pyarrow as pa

LONG = "long"
DOUBLE = "double"
BOOLEAN = "boolean"
STRING = "string"
STRUCT = "struct"
LIST = "list"
TIMESTAMP = "timestamp"  # only from a table (the lake's own columns), never inferred
INT = "int"  # only from a table written by someone else
FLOAT = "float"
MIXED = "mixed"  # values of several incompatible types: Spark says VARIANT
# Only from a registered schema or a table, never inferred:
MAP = "map"  # string keys; `element` is the values' type
DATE = "date"
DECIMAL = "decimal"  # `precision` and `scale` as Iceberg's decimal(P, S)

SCALARS = (LONG, DOUBLE, BOOLEAN, STRING, TIMESTAMP, INT, FLOAT, DATE, DECIMAL)


@dataclass(frozen=True)
class JType:
    kind: str
    fields: tuple[tuple[str, JType], ...] = ()
    element: JType | None = None
    # For MIXED: the kinds seen (for the conflict record), e.g. ("long", "string").
    seen: tuple[str, ...] = field(default=())
    precision: int = 0  # DECIMAL only
    scale: int = 0  # DECIMAL only

    def field(self, name: str) -> JType | None:
        for n, t in self.fields:
            if n == name:
                return t
        return None

    def names(self) -> list[str]:
        return [n for n, _ in self.fields]

    def render(self) -> str:
        """Short human form, for `lake describe` and conflict records."""
        if self.kind == STRUCT:
            return "struct<" + ", ".join(f"{n}: {t.render()}" for n, t in self.fields) + ">"
        if self.kind == LIST:
            assert self.element is not None
            return f"list<{self.element.render()}>"
        if self.kind == MAP:
            assert self.element is not None
            return f"map<string, {self.element.render()}>"
        if self.kind == DECIMAL:
            return f"decimal({self.precision},{self.scale})"
        if self.kind == MIXED:
            return "mixed(" + ", ".join(self.seen) + ")" if self.seen else "mixed"
        return self.kind


def struct(*fields: tuple[str, JType]) -> JType:
    return JType(STRUCT, tuple(fields))


def scalar(kind: str) -> JType:
    return JType(kind)


def map_of(values: JType) -> JType:
    return JType(MAP, element=values)


def decimal(precision: int, scale: int) -> JType:
    """Iceberg's decimal(P, S): P at most 38, 0 <= S <= P."""
    if not 0 < precision <= 38 or not 0 <= scale <= precision:
        raise ValueError(f"decimal({precision},{scale}) has no Iceberg form")
    return JType(DECIMAL, precision=precision, scale=scale)


class TypeStringError(ValueError):
    pass


class _Parser:
    """Recursive descent over Spark's variant schema strings."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def _ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] == " ":
            self.pos += 1

    def _expect(self, token: str) -> None:
        self._ws()
        if not self.text.startswith(token, self.pos):
            raise TypeStringError(f"expected {token!r} at {self.pos} in {self.text!r}")
        self.pos += len(token)

    def _word(self) -> str:
        self._ws()
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isalnum()
                                             or self.text[self.pos] == "_"):
            self.pos += 1
        return self.text[start:self.pos]

    def _name(self) -> str:
        self._ws()
        if self.text.startswith("`", self.pos):
            self.pos += 1
            out = []
            while True:
                if self.pos >= len(self.text):
                    raise TypeStringError(f"unterminated name in {self.text!r}")
                ch = self.text[self.pos]
                if ch == "`":
                    if self.text.startswith("``", self.pos):
                        out.append("`")
                        self.pos += 2
                        continue
                    self.pos += 1
                    return "".join(out)
                out.append(ch)
                self.pos += 1
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in ":":
            self.pos += 1
        return self.text[start:self.pos].strip()

    def parse(self) -> JType | None:
        result = self._type()
        self._ws()
        if self.pos != len(self.text):
            raise TypeStringError(f"trailing text at {self.pos} in {self.text!r}")
        return result

    def _type(self) -> JType | None:
        word = self._word().upper()
        if word == "OBJECT":
            self._expect("<")
            fields: list[tuple[str, JType]] = []
            self._ws()
            if self.text.startswith(">", self.pos):
                self.pos += 1
                return JType(STRUCT, ())
            while True:
                name = self._name()
                self._expect(":")
                t = self._type()
                if t is not None:
                    fields.append((name, t))
                self._ws()
                if self.text.startswith(",", self.pos):
                    self.pos += 1
                    continue
                self._expect(">")
                return JType(STRUCT, tuple(fields))
        if word == "ARRAY":
            self._expect("<")
            element = self._type()
            self._expect(">")
            return None if element is None else JType(LIST, element=element)
        if word == "DECIMAL":
            self._expect("(")
            while self.pos < len(self.text) and self.text[self.pos] != ")":
                self.pos += 1
            self._expect(")")
            return JType(DOUBLE)
        simple = {
            "BIGINT": LONG, "INT": LONG, "SMALLINT": LONG, "TINYINT": LONG,
            "DOUBLE": DOUBLE, "FLOAT": DOUBLE, "BOOLEAN": BOOLEAN, "STRING": STRING,
            "DATE": STRING, "TIMESTAMP": STRING, "TIMESTAMP_NTZ": STRING, "BINARY": STRING,
            "VARIANT": MIXED,
        }
        if word == "VOID":
            return None  # only nulls seen: no type to learn yet
        if word not in simple:
            raise TypeStringError(f"unknown type {word!r} in {self.text!r}")
        return JType(simple[word])


def parse_variant_schema(text: str | None) -> JType | None:
    """The JType of Spark's `schema_of_variant(_agg)` output; None when only nulls were seen."""
    if text is None:
        return None
    return _Parser(text).parse()


def prune(t: JType | None) -> JType | None:
    """Drop what carries no type yet: empty objects, lists of nothing."""
    if t is None:
        return None
    if t.kind == STRUCT:
        kept = tuple((n, p) for n, f in t.fields if (p := prune(f)) is not None)
        return JType(STRUCT, kept) if kept else None
    if t.kind == LIST:
        element = prune(t.element)
        return None if element is None else JType(LIST, element=element)
    if t.kind == MAP:
        values = prune(t.element)
        return None if values is None else JType(MAP, element=values)
    return t


def spark_ddl(t: JType) -> str:
    """The Spark SQL type for casting a variant into this type."""
    if t.kind == STRUCT:
        return "struct<" + ",".join(f"`{n.replace('`', '``')}`:{spark_ddl(f)}"
                                    for n, f in t.fields) + ">"
    if t.kind == LIST:
        assert t.element is not None
        return f"array<{spark_ddl(t.element)}>"
    if t.kind == MAP:
        assert t.element is not None
        return f"map<string,{spark_ddl(t.element)}>"
    if t.kind == DECIMAL:
        return f"decimal({t.precision},{t.scale})"
    return {DATE: "date", LONG: "bigint", DOUBLE: "double", BOOLEAN: "boolean", STRING: "string",
            MIXED: "string", TIMESTAMP: "timestamp", INT: "int", FLOAT: "float"}[t.kind]


def to_arrow(t: JType) -> pa.DataType:
    if t.kind == STRUCT:
        return pa.struct([pa.field(n, to_arrow(f), nullable=True) for n, f in t.fields])
    if t.kind == LIST:
        assert t.element is not None
        return pa.list_(pa.field("element", to_arrow(t.element), nullable=True))
    if t.kind == MAP:
        assert t.element is not None
        return pa.map_(pa.string(), pa.field("value", to_arrow(t.element), nullable=True))
    if t.kind == DECIMAL:
        return pa.decimal128(t.precision, t.scale)
    return {LONG: pa.int64(), DOUBLE: pa.float64(), BOOLEAN: pa.bool_(), STRING: pa.string(),
            DATE: pa.date32(), MIXED: pa.string(), TIMESTAMP: pa.timestamp("us", tz="UTC"),
            INT: pa.int32(), FLOAT: pa.float32()}[t.kind]


def from_arrow(dtype: pa.DataType) -> JType:
    """A table column's type (read through its Arrow schema) as a JType."""
    if pa.types.is_struct(dtype):
        return JType(STRUCT, tuple((dtype.field(i).name, from_arrow(dtype.field(i).type))
                                   for i in range(dtype.num_fields)))
    if pa.types.is_map(dtype):
        return JType(MAP, element=from_arrow(dtype.item_type))
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return JType(LIST, element=from_arrow(dtype.value_type))
    if pa.types.is_int64(dtype):
        return JType(LONG)
    if pa.types.is_integer(dtype):
        return JType(INT)
    if pa.types.is_float64(dtype):
        return JType(DOUBLE)
    if pa.types.is_floating(dtype):
        return JType(FLOAT)
    if pa.types.is_boolean(dtype):
        return JType(BOOLEAN)
    if pa.types.is_timestamp(dtype):
        return JType(TIMESTAMP)
    if pa.types.is_date(dtype):
        return JType(DATE)
    if pa.types.is_decimal(dtype):
        return JType(DECIMAL, precision=dtype.precision, scale=dtype.scale)
    return JType(STRING)


def json_error(raw: bytes | None) -> str:
    """Why a value is not a JSON object, in words a person can act on."""
    if raw is None:
        return "empty value"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"not UTF-8 text: {e.reason} at byte {e.start}"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        return f"malformed JSON: {e.msg} at line {e.lineno} column {e.colno}"
    if not isinstance(value, dict):
        return f"not a JSON object but a {type(value).__name__}"
    return "malformed JSON (refused by Spark's parser)"
