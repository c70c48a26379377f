"""The registry's state: what replaying `_schemas` from the beginning leaves behind.

Only the store's apply step changes it, on the event loop's thread, record by record in
offset order, so every instance that has read to the same offset holds the same state.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from odradek.registry import records as rec
from odradek.registry.formats.base import Reference
from odradek.registry.records import SchemaValue


@dataclass
class RegistryState:
    subjects: dict[str, dict[int, SchemaValue]] = field(default_factory=dict)
    # every (subject, version) that carries an id, deleted or not
    id_uses: dict[int, set[tuple[str, int]]] = field(default_factory=dict)
    config: dict[str | None, str] = field(default_factory=dict)
    mode: dict[str | None, str] = field(default_factory=dict)
    # (schemaType, schema, references) -> the id that text got first
    ids_by_text: dict[tuple[str, str, tuple[Reference, ...]], int] = field(default_factory=dict)
    max_id: int = 0
    offset: int = -1  # the last applied record's offset

    def apply(self, key: dict[str, Any], value: dict[str, Any] | None, offset: int) -> None:
        self.offset = max(self.offset, offset)
        kind = key.get("keytype")
        subject = key.get("subject")
        if kind == rec.SCHEMA:
            version = int(key["version"])
            if value is None:
                self._drop(str(subject), version)
            else:
                self._put(rec.decode_schema_value(value))
        elif kind == rec.CONFIG:
            if value is None:
                self.config.pop(subject, None)
            else:
                self.config[subject] = str(value["compatibilityLevel"])
        elif kind == rec.MODE:
            if value is None:
                self.mode.pop(subject, None)
            else:
                self.mode[subject] = str(value["mode"])
        elif kind == rec.DELETE_SUBJECT and value is not None:
            upto = int(value["version"])
            versions = self.subjects.get(str(subject), {})
            for v, sv in list(versions.items()):
                if v <= upto:
                    versions[v] = replace(sv, deleted=True)
        elif kind == rec.CLEAR_SUBJECT and value is not None:
            for v, sv in list(self.subjects.get(str(subject), {}).items()):
                if sv.deleted:
                    self._drop(sv.subject, v)

    def _put(self, sv: SchemaValue) -> None:
        old = self.subjects.get(sv.subject, {}).get(sv.version)
        if old is not None and old.id != sv.id:
            self._drop(sv.subject, sv.version)
        self.subjects.setdefault(sv.subject, {})[sv.version] = sv
        self.id_uses.setdefault(sv.id, set()).add((sv.subject, sv.version))
        self.ids_by_text.setdefault((sv.schema_type, sv.schema, sv.references), sv.id)
        self.max_id = max(self.max_id, sv.id)

    def _drop(self, subject: str, version: int) -> None:
        versions = self.subjects.get(subject, {})
        sv = versions.pop(version, None)
        if not versions:
            self.subjects.pop(subject, None)
        if sv is not None:
            uses = self.id_uses.get(sv.id, set())
            uses.discard((subject, version))
            if not uses:
                self.id_uses.pop(sv.id, None)
                text = (sv.schema_type, sv.schema, sv.references)
                if self.ids_by_text.get(text) == sv.id:
                    del self.ids_by_text[text]

    # reads

    def versions(self, subject: str, deleted: bool = False) -> list[SchemaValue]:
        found = self.subjects.get(subject, {})
        return [found[v] for v in sorted(found) if deleted or not found[v].deleted]

    def subject_names(self, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.subjects if self.versions(s, deleted))

    def by_id(self, schema_id: int) -> SchemaValue | None:
        uses = self.id_uses.get(schema_id)
        if not uses:
            return None
        subject, version = min(uses)
        return self.subjects[subject][version]

    def id_usage(self, schema_id: int, deleted: bool = False) -> list[SchemaValue]:
        found = [self.subjects[s][v] for s, v in sorted(self.id_uses.get(schema_id, ()))]
        return [sv for sv in found if deleted or not sv.deleted]

    def find_id(self, schema_type: str, schema: str, refs: tuple[Reference, ...]) -> int | None:
        return self.ids_by_text.get((schema_type, schema, refs))

    def referenced_by(self, subject: str, version: int) -> list[int]:
        ids = {sv.id for versions in self.subjects.values() for sv in versions.values()
               if not sv.deleted and any(r.subject == subject and r.version == version
                                         for r in sv.references)}
        return sorted(ids)
