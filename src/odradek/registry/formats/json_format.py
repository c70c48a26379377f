"""JSON Schema: validated with `jsonschema` (draft-07 by default, as Confluent; 2020-12 and
the others by `$schema`), and compared by Confluent's rules for JSON Schema evolution.

Backward compatibility asks: is every document valid under the writer's schema also valid
under the reader's? The difference names are Confluent's (`PROPERTY_ADDED_TO_OPEN_CONTENT_
MODEL`, `REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL`, `TYPE_NARROWED`...).
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from odradek.registry.errors import InvalidSchema
from odradek.registry.formats.base import ParsedSchema, ResolvedReference, compact_json

Json = Any
_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")


def _types(schema: Json) -> set[str] | None:
    """The JSON types a schema admits, or None for any."""
    if schema is True or schema == {}:
        return None
    if schema is False:
        return set()
    t = schema.get("type")
    if t is None:
        return None
    ts = {t} if isinstance(t, str) else set(t)
    if "number" in ts:
        ts.add("integer")  # every integer is a number
    return ts


def _is_open(schema: Json) -> bool:
    extra = schema.get("additionalProperties", True)
    return extra is not False and "patternProperties" not in schema


class _Diff:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def add(self, kind: str, path: str) -> None:
        self.errors.append(f"{{errorType:'{kind}', description:'at path '{path or '#/'}''}}")

    def compare(self, reader: Json, writer: Json, path: str) -> None:
        if isinstance(reader, bool) or isinstance(writer, bool):
            if reader is False and writer is not False:
                self.add("SCHEMA_REMOVED", path)
            elif writer is True and reader is not True and reader != {}:
                self.add("TYPE_NARROWED", path)
            return
        if not isinstance(reader, dict) or not isinstance(writer, dict):
            return
        if reader.get("$ref") != writer.get("$ref"):
            self.add("REFERENCE_CHANGED", path)
        rt, wt = _types(reader), _types(writer)
        if rt is not None and (wt is None or not wt <= rt):
            self.add("TYPE_NARROWED" if wt and rt < wt else "TYPE_CHANGED", f"{path}/type")
        self._compare_values(reader, writer, path)
        if (wt is None or "object" in wt) and (rt is None or "object" in rt):
            self._compare_objects(reader, writer, path)
        if (wt is None or "array" in wt) and "items" in reader:
            self.compare(reader["items"], writer.get("items", True), f"{path}/items")

    def _compare_values(self, reader: Json, writer: Json, path: str) -> None:
        if "enum" in reader and ("enum" not in writer
                                 or any(v not in reader["enum"] for v in writer["enum"])):
            self.add("ENUM_ARRAY_NARROWED", f"{path}/enum")
        if "const" in reader and reader.get("const") != writer.get("const"):
            self.add("CONST_CHANGED", f"{path}/const")
        for key, tighter in (("maxLength", min), ("maxItems", min), ("maxProperties", min),
                             ("maximum", min), ("exclusiveMaximum", min),
                             ("minLength", max), ("minItems", max), ("minProperties", max),
                             ("minimum", max), ("exclusiveMinimum", max)):
            if key not in reader or isinstance(reader[key], bool):
                continue
            if key not in writer:
                self.add(f"{_camel_to_const(key)}_ADDED", f"{path}/{key}")
            elif not isinstance(writer[key], bool) and tighter(reader[key], writer[key]) \
                    == reader[key] != writer[key]:
                kind = "DECREASED" if tighter is min else "INCREASED"
                self.add(f"{_camel_to_const(key)}_{kind}", f"{path}/{key}")
        if "pattern" in reader and reader["pattern"] != writer.get("pattern"):
            self.add("PATTERN_CHANGED" if "pattern" in writer else "PATTERN_ADDED",
                     f"{path}/pattern")

    def _compare_objects(self, reader: Json, writer: Json, path: str) -> None:
        rprops: dict[str, Json] = reader.get("properties", {})
        wprops: dict[str, Json] = writer.get("properties", {})
        if not _is_open(writer) and _is_open(reader):
            pass  # ADDITIONAL_PROPERTIES_ADDED: the reader accepts more
        elif _is_open(writer) and not _is_open(reader):
            self.add("ADDITIONAL_PROPERTIES_REMOVED", f"{path}/additionalProperties")
        elif isinstance(reader.get("additionalProperties"), dict):
            self.compare(reader["additionalProperties"],
                         writer.get("additionalProperties", True),
                         f"{path}/additionalProperties")
        rreq, wreq = set(reader.get("required", [])), set(writer.get("required", []))
        for name, rschema in rprops.items():
            where = f"{path}/properties/{name}"
            if name in wprops:
                self.compare(rschema, wprops[name], where)
            elif _is_open(writer):
                # old documents may carry this name with any value
                if rschema is not True and rschema != {}:
                    self.add("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where)
            elif name in rreq and not (isinstance(rschema, dict) and "default" in rschema):
                self.add("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where)
        for name, wschema in wprops.items():
            if name not in rprops and not _is_open(reader):
                extra = reader.get("additionalProperties", True)
                if extra is False:
                    self.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
                             f"{path}/properties/{name}")
                else:
                    self.compare(extra, wschema, f"{path}/properties/{name}")
        for name in sorted(rreq - wreq):
            rschema = rprops.get(name)
            if not (isinstance(rschema, dict) and "default" in rschema):
                self.add("REQUIRED_ATTRIBUTE_ADDED", f"{path}/required/{name}")


def _camel_to_const(key: str) -> str:
    return "".join(f"_{c}" if c.isupper() else c.upper() for c in key)


class JsonSchema:
    schema_type = "JSON"

    def __init__(self, text: str, refs: tuple[ResolvedReference, ...] = ()) -> None:
        try:
            self.schema: Json = json.loads(text)
        except ValueError as e:
            raise InvalidSchema(f"Invalid schema {text}, details: {e}") from e
        if not isinstance(self.schema, (dict, bool)):
            raise InvalidSchema(f"Invalid schema {text}, details: a JSON Schema is an object "
                                "or a boolean")
        self._refs = refs
        default = jsonschema.Draft7Validator
        validator = (jsonschema.validators.validator_for(self.schema, default=default)
                     if isinstance(self.schema, dict) else default)
        if isinstance(self.schema, dict) and "$schema" in self.schema and \
                validator is default and "draft-07" not in str(self.schema["$schema"]):
            raise InvalidSchema(f"Invalid schema {text}, details: unknown $schema "
                                f"{self.schema['$schema']}")
        try:
            validator.check_schema(self.schema)
        except jsonschema.exceptions.SchemaError as e:
            raise InvalidSchema(f"Invalid schema {text}, details: {e.message}") from e

    def canonical(self) -> str:
        return compact_json(self.schema)

    def normalized(self) -> JsonSchema:
        return JsonSchema(compact_json(self.schema, sort_keys=True), self._refs)

    def reader_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, JsonSchema):
            return [f"Incompatible schema type {writer.schema_type}"]
        diff = _Diff()
        diff.compare(self.schema, writer.schema, "#")
        return diff.errors

    def formatted(self, fmt: str | None) -> str:
        return self.canonical()
