"""The registry's operations, as Confluent's KafkaSchemaRegistry does them.

Reads answer from this instance's replayed state; writes run on the leader only (the
HTTP layer forwards them there), one at a time, after reading `_schemas` to its end so
the next id and version follow everything any earlier leader wrote. Everything a write
needs is checked before the first record is produced: bad input leaves no trace.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from odradek.registry import errors as e
from odradek.registry import records as rec
from odradek.registry.compatibility import LEVELS, check_compatibility
from odradek.registry.formats import SCHEMA_TYPES, ParsedSchema, parse_schema
from odradek.registry.formats.base import Reference, ResolvedReference
from odradek.registry.records import SchemaValue
from odradek.registry.state import RegistryState
from odradek.registry.store import KafkaStore, Record

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
MAX_VERSION = 2**31 - 1


@dataclass(frozen=True)
class SchemaRequest:
    schema: str
    schema_type: str
    references: tuple[Reference, ...]
    id: int | None = None
    version: int | None = None

    @classmethod
    def from_json(cls, body: Any) -> SchemaRequest:
        if not isinstance(body, dict):
            raise e.UnprocessableEntity("Unrecognized request body: expected a JSON object")
        schema = body.get("schema")
        if not isinstance(schema, str) or not schema.strip():
            raise e.InvalidSchema("Empty schema" if schema in (None, "")
                                  else "Invalid schema: 'schema' must be a string")
        schema_type = body.get("schemaType") or "AVRO"
        if schema_type not in SCHEMA_TYPES:
            raise e.InvalidSchema(f"Invalid schema type {schema_type}")
        refs = []
        for r in body.get("references") or []:
            try:
                refs.append(Reference(str(r["name"]), str(r["subject"]), int(r["version"])))
            except (KeyError, TypeError, ValueError) as err:
                raise e.InvalidSchema(f"Invalid schema reference {r}") from err
        schema_id, version = body.get("id"), body.get("version")
        for name, value in (("id", schema_id), ("version", version)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or value < (0 if name == "version" else 1)):
                raise e.UnprocessableEntity(f"Invalid {name} {value}")
        return cls(schema, schema_type, tuple(refs), schema_id or None, version or None)


def check_subject(subject: str) -> None:
    if not subject or subject.strip() == "" or any(ord(c) < 32 or 127 <= ord(c) < 160
                                                   for c in subject) \
            or subject in ("__GLOBAL", "__EMPTY"):
        raise e.InvalidSubject(subject)


def parse_version(version: str | int) -> int | None:
    """A version from a path: a number, or None for latest ("latest" or -1)."""
    if version == "latest" or str(version) == "-1":
        return None
    try:
        v = int(version)
    except ValueError as err:
        raise e.InvalidVersion(version) from err
    if not 1 <= v <= MAX_VERSION:
        raise e.InvalidVersion(version)
    return v


class RegistryService:
    def __init__(self, store: KafkaStore, default_compatibility: str = "BACKWARD",
                 max_schema_bytes: int = 1 << 20) -> None:
        self.store = store
        self.default_compatibility = default_compatibility
        self.max_schema_bytes = max_schema_bytes
        self._write_lock = asyncio.Lock()

    @property
    def state(self) -> RegistryState:
        state: RegistryState = self.store.state
        return state

    # schemas and references

    def resolve(self, refs: tuple[Reference, ...], depth: int = 0) -> tuple[ResolvedReference, ...]:
        if depth > 32:
            raise e.InvalidSchema("Invalid schema: references nest too deeply")
        out = []
        for ref in refs:
            try:
                sv = self.version(ref.subject, ref.version if ref.version > 0 else None)
            except (e.SubjectNotFound, e.VersionNotFound) as err:
                raise e.InvalidSchema(f"Invalid schema: reference {ref.name} to subject "
                                      f"'{ref.subject}' version {ref.version} not found") from err
            out.append(ResolvedReference(ref.name, sv.schema,
                                         self.resolve(sv.references, depth + 1)))
        return tuple(out)

    def parse(self, req: SchemaRequest, normalize: bool = False) -> ParsedSchema:
        if len(req.schema.encode()) > self.max_schema_bytes:
            raise e.SchemaTooLarge(f"Schema too large: {len(req.schema.encode())} bytes, "
                                   f"the limit is {self.max_schema_bytes}")
        parsed = parse_schema(req.schema_type, req.schema, self.resolve(req.references))
        return parsed.normalized() if normalize else parsed

    def parsed_value(self, sv: SchemaValue) -> ParsedSchema:
        return parse_schema(sv.schema_type, sv.schema, self.resolve(sv.references))

    # reads

    def version(self, subject: str, version: int | None, deleted: bool = False) -> SchemaValue:
        found = self.state.versions(subject, deleted=True)
        if not found or (not deleted and all(sv.deleted for sv in found)):
            raise e.SubjectNotFound(subject)
        live = found if deleted else [sv for sv in found if not sv.deleted]
        if version is None:
            return live[-1]
        for sv in live:
            if sv.version == version:
                return sv
        raise e.VersionNotFound(version)

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        found = self.state.versions(subject, deleted)
        if not found:
            raise e.SubjectNotFound(subject)
        return [sv.version for sv in found]

    def by_id(self, schema_id: int) -> SchemaValue:
        sv = self.state.by_id(schema_id)
        if sv is None:
            raise e.SchemaNotFound(schema_id)
        return sv

    def lookup(self, subject: str, req: SchemaRequest, normalize: bool,
               deleted: bool = False) -> SchemaValue:
        check_subject(subject)
        found = self.state.versions(subject, deleted)
        if not found:
            raise e.SubjectNotFound(subject)
        parsed = self.parse(req, normalize)
        match = self._match(found, req, parsed)
        if match is None:
            raise e.SchemaNotFound()
        return match

    def _match(self, found: list[SchemaValue], req: SchemaRequest,
               parsed: ParsedSchema) -> SchemaValue | None:
        text = parsed.canonical()
        for sv in reversed(found):
            if (sv.schema_type, sv.schema, sv.references) == \
                    (req.schema_type, text, req.references):
                return sv
        # an equivalent spelling (key order, whitespace) of a registered schema
        normal = parsed.normalized().canonical()
        for sv in reversed(found):
            if sv.schema_type == req.schema_type and sv.references == req.references:
                try:
                    if self.parsed_value(sv).normalized().canonical() == normal:
                        return sv
                except e.RegistryError:
                    continue
        return None

    def compatibility_level(self, subject: str | None) -> str:
        if subject is not None and subject in self.state.config:
            return self.state.config[subject]
        return self.state.config.get(None, self.default_compatibility)

    def mode(self, subject: str | None) -> str:
        if subject is not None and subject in self.state.mode:
            return self.state.mode[subject]
        return self.state.mode.get(None, "READWRITE")

    def compatibility_errors(self, subject: str, parsed: ParsedSchema,
                             against: list[SchemaValue], level: str | None = None) -> list[str]:
        level = level or self.compatibility_level(subject)
        previous = [self.parsed_value(sv) for sv in against]
        return check_compatibility(level, parsed, previous)

    # writes (the leader's)

    def _writable(self, subject: str | None, importing: bool = False) -> None:
        mode = self.mode(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            raise e.OperationNotPermitted(f"Subject {subject} is in read-only mode"
                                          if subject else "The registry is in read-only mode")
        if importing and mode != "IMPORT":
            raise e.OperationNotPermitted(f"Subject {subject} is not in import mode")

    async def register(self, subject: str, req: SchemaRequest, normalize: bool) -> SchemaValue:
        check_subject(subject)
        self._writable(subject, importing=req.id is not None)
        parsed = self.parse(req, normalize)
        async with self._write_lock:
            await self.store.sync()
            text = parsed.canonical()
            every = self.state.versions(subject, deleted=True)
            live = [sv for sv in every if not sv.deleted]
            if req.id is None:
                match = self._match(live, req, parsed)
                if match is not None:
                    return match
            if self.mode(subject) != "IMPORT":
                problems = self.compatibility_errors(subject, parsed, live)
                if problems:
                    raise e.IncompatibleSchema(
                        "Schema being registered is incompatible with an earlier schema for "
                        f"subject \"{subject}\", details: [{', '.join(problems)}]")
            schema_id = req.id or self.state.find_id(req.schema_type, text, req.references)
            if req.id is not None:
                holder = self.state.by_id(req.id)
                if holder is not None and (holder.schema_type, holder.schema,
                                           holder.references) != \
                        (req.schema_type, text, req.references):
                    raise e.IdDoesNotMatch(f"Schema already registered with id {req.id} "
                                           "instead of input id")
            if schema_id is None:
                schema_id = self.state.max_id + 1
            version = req.version or (every[-1].version + 1 if every else 1)
            if req.version is not None and any(sv.version == version for sv in every):
                raise e.InvalidSchema(f"Version {version} already exists in subject "
                                      f"'{subject}'")
            sv = SchemaValue(subject, version, schema_id, text, req.schema_type,
                             req.references)
            await self.store.write([(rec.schema_key(subject, version), rec.encode_value(sv))])
            return sv

    async def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        check_subject(subject)
        self._writable(subject)
        async with self._write_lock:
            await self.store.sync()
            every = self.state.versions(subject, deleted=True)
            if not every:
                raise e.SubjectNotFound(subject)
            live = [sv for sv in every if not sv.deleted]
            for sv in live if not permanent else every:
                if self.state.referenced_by(subject, sv.version):
                    raise e.ReferenceExists(
                        "One or more references exist to the schema "
                        f"{{magic=1,keytype=SCHEMA,subject={subject},version={sv.version}}}.")
            if permanent:
                if live:
                    raise e.SubjectNotSoftDeleted(subject)
                batch: list[Record] = [(rec.schema_key(subject, sv.version), None)
                                      for sv in every]
                if subject in self.state.config:
                    batch.append((rec.config_key(subject), None))
                if subject in self.state.mode:
                    batch.append((rec.mode_key(subject), None))
                await self.store.write(batch)
                return [sv.version for sv in every]
            if not live:
                raise e.SubjectSoftDeleted(subject)
            await self.store.write([(rec.delete_subject_key(subject), rec.encode_value(
                {"subject": subject, "version": live[-1].version}))])
            return [sv.version for sv in live]

    async def delete_version(self, subject: str, version: int | None,
                             permanent: bool) -> int:
        check_subject(subject)
        self._writable(subject)
        async with self._write_lock:
            await self.store.sync()
            # a soft-deleted version is still addressable by number, to say so
            sv = self.version(subject, version, deleted=permanent or version is not None)
            if self.state.referenced_by(subject, sv.version):
                raise e.ReferenceExists(
                    "One or more references exist to the schema "
                    f"{{magic=1,keytype=SCHEMA,subject={subject},version={sv.version}}}.")
            if permanent:
                if not sv.deleted:
                    raise e.VersionNotSoftDeleted(subject, sv.version)
                await self.store.write([(rec.schema_key(subject, sv.version), None)])
            else:
                if sv.deleted:
                    raise e.VersionSoftDeleted(subject, sv.version)
                deleted = SchemaValue(sv.subject, sv.version, sv.id, sv.schema,
                                      sv.schema_type, sv.references, deleted=True)
                await self.store.write([(rec.schema_key(subject, sv.version),
                                         rec.encode_value(deleted))])
            return sv.version

    async def set_config(self, subject: str | None, level: Any) -> str:
        if subject is not None:
            check_subject(subject)
        if not isinstance(level, str) or level.upper() not in LEVELS:
            raise e.InvalidCompatibilityLevel()
        self._writable(subject)
        async with self._write_lock:
            await self.store.write([(rec.config_key(subject), rec.encode_value(
                {"compatibilityLevel": level.upper()}))])
        return level.upper()

    async def delete_config(self, subject: str | None) -> str:
        previous = self.compatibility_level(subject)
        if subject is not None and subject not in self.state.config:
            raise e.SubjectCompatibilityNotConfigured(subject)
        async with self._write_lock:
            await self.store.write([(rec.config_key(subject), None)])
        return previous

    async def set_mode(self, subject: str | None, mode: Any, force: bool) -> str:
        if subject is not None:
            check_subject(subject)
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise e.InvalidMode()
        chosen = str(mode).upper()
        if chosen == "IMPORT" and not force:
            present = self.state.subject_names() if subject is None \
                else [s for s in self.state.subject_names() if s == subject]
            if present:
                raise e.OperationNotPermitted(
                    "Cannot import since found existing subjects")
        async with self._write_lock:
            await self.store.write([(rec.mode_key(subject),
                                     rec.encode_value({"mode": chosen}))])
        return chosen

    async def delete_mode(self, subject: str) -> str:
        if subject not in self.state.mode:
            raise e.SubjectModeNotConfigured(subject)
        previous = self.state.mode[subject]
        async with self._write_lock:
            await self.store.write([(rec.mode_key(subject), None)])
        return previous

