"""What every schema format gives the registry: a parsed schema it can compare and print."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Reference:
    """A named schema this one imports: `{"name", "subject", "version"}` in Confluent's API."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class ResolvedReference:
    """A reference with the text and type of the schema it points at, resolved recursively."""

    name: str
    schema: str
    references: tuple[ResolvedReference, ...]


class ParsedSchema(Protocol):
    schema_type: str

    def canonical(self) -> str:
        """The string the registry stores and serves for this schema."""
        ...

    def normalized(self) -> ParsedSchema:
        """The same schema in a form where equivalent spellings compare equal."""
        ...

    def reader_errors(self, writer: ParsedSchema) -> list[str]:
        """Why data written with `writer` cannot be read with this schema (empty if it can)."""
        ...

    def formatted(self, fmt: str | None) -> str:
        """The schema in an output format a client asked for (`?format=`)."""
        ...


def compact_json(value: object, sort_keys: bool = False) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=sort_keys, ensure_ascii=False)
