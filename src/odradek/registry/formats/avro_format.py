"""Avro schemas through Apache's `avro` package: its parser and its reader/writer check.

Confluent's checks call Avro's own `SchemaCompatibility`; `avro.compatibility` is the same
algorithm in Python, so the verdicts (and the incompatibility names) match.
"""

from __future__ import annotations

import json
from typing import Any

import avro.compatibility
import avro.errors
import avro.name
import avro.schema

from odradek.registry.errors import InvalidSchema
from odradek.registry.formats.base import ParsedSchema, ResolvedReference, compact_json


def _load_names(refs: tuple[ResolvedReference, ...], names: avro.name.Names,
                seen: set[str]) -> None:
    # a reference's own references are defined first, so its named types resolve
    for ref in refs:
        if ref.name in seen:
            continue
        seen.add(ref.name)
        _load_names(ref.references, names, seen)
        avro.schema.make_avsc_object(json.loads(ref.schema), names)


class AvroSchema:
    schema_type = "AVRO"

    def __init__(self, text: str, refs: tuple[ResolvedReference, ...] = ()) -> None:
        try:
            self._json: Any = json.loads(text)
        except ValueError:
            # Avro also accepts a bare primitive name, as Confluent does
            self._json = text.strip()
        self._refs = refs
        try:
            names = avro.name.Names()
            _load_names(refs, names, set())
            self.schema = avro.schema.make_avsc_object(self._json, names)
        except (avro.errors.AvroException, ValueError, TypeError, KeyError,
                AttributeError) as e:
            raise InvalidSchema(f"Invalid schema {text}, details: {e}") from e

    def canonical(self) -> str:
        return compact_json(self._json)

    def _expanded(self) -> Any:
        # the referenced types stay names, as in the text registered
        names = avro.name.Names()
        _load_names(self._refs, names, set())
        return self.schema.to_json(names)

    def normalized(self) -> AvroSchema:
        return AvroSchema(compact_json(self._expanded()), self._refs)

    def reader_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, AvroSchema):
            return [f"Incompatible schema type {writer.schema_type}"]
        checker = avro.compatibility.ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]
        result = checker.get_compatibility(self.schema, writer.schema)
        if result.compatibility is avro.compatibility.SchemaCompatibilityType.compatible:
            return []
        kinds = [str(getattr(k, "value", k)).upper() for k in result.incompatibilities]
        details = sorted(str(m) for m in result.messages)
        locations = sorted(str(loc) for loc in result.locations)
        return [f"{{errorType:'{kind}', description:'{'; '.join(details)}', "
                f"additionalInfo:'{', '.join(locations)}'}}" for kind in kinds]

    def formatted(self, fmt: str | None) -> str:
        if fmt == "resolved":
            return compact_json(self.schema.to_json())  # the references inlined
        return self.canonical()
