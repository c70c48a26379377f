"""The `_schemas` topic's records: Confluent's key and value JSON, sans-IO.

Keys are JSON objects with `keytype` first and `magic` last, in the order Confluent's
Jackson classes write them, so a compacted topic keeps one record per key whichever
registry (Confluent, Karapace, odradek) wrote it. A null value is a tombstone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from odradek.registry.formats.base import Reference, compact_json

SCHEMA, CONFIG, MODE = "SCHEMA", "CONFIG", "MODE"
DELETE_SUBJECT, CLEAR_SUBJECT, NOOP = "DELETE_SUBJECT", "CLEAR_SUBJECT", "NOOP"


@dataclass(frozen=True)
class SchemaValue:
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    deleted: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"subject": self.subject, "version": self.version,
                               "id": self.id}
        if self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [r.to_json() for r in self.references]
        out["schema"] = self.schema
        out["deleted"] = self.deleted
        return out


def schema_key(subject: str, version: int) -> bytes:
    return _key({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def config_key(subject: str | None) -> bytes:
    return _key({"keytype": CONFIG, "subject": subject, "magic": 0})


def mode_key(subject: str | None) -> bytes:
    return _key({"keytype": MODE, "subject": subject, "magic": 0})


def delete_subject_key(subject: str) -> bytes:
    return _key({"keytype": DELETE_SUBJECT, "subject": subject, "magic": 0})


def noop_key() -> bytes:
    return _key({"keytype": NOOP, "magic": 0})


def _key(fields: dict[str, Any]) -> bytes:
    return compact_json(fields).encode()


def encode_value(value: dict[str, Any] | SchemaValue | None) -> bytes | None:
    if value is None:
        return None
    return compact_json(value.to_json() if isinstance(value, SchemaValue) else value).encode()


def decode_schema_value(value: dict[str, Any]) -> SchemaValue:
    refs = tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                 for r in value.get("references") or ())
    return SchemaValue(subject=str(value["subject"]), version=int(value["version"]),
                       id=int(value["id"]), schema=str(value["schema"]),
                       schema_type=str(value.get("schemaType") or "AVRO"),
                       references=refs, deleted=bool(value.get("deleted", False)))


def decode(key: bytes, value: bytes | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The key and value JSON of one record; raises ValueError on what is not ours."""
    k = json.loads(key)
    if not isinstance(k, dict) or "keytype" not in k:
        raise ValueError("not a schema registry key")
    v = json.loads(value) if value else None
    if v is not None and not isinstance(v, dict):
        raise ValueError("not a schema registry value")
    return k, v
