"""Confluent-framed values (magic byte 0, a 4-byte schema id, the body) decoded by schema
id through a registry, into JSON text the lake ingests.

Same contract as `odradek.pipeline.avro_values.AvroDecoder` — `decode(value)` gives
`(json, None)` or `(None, why not)` — so the lake writer takes either; but the writer's
schema is looked up by the id in each record, for Avro, JSON Schema and Protobuf alike.
A record whose id the registry does not know, or whose bytes do not decode, gets its
reason and is quarantined by the lake, never dropped. Picklable (for Spark tasks): the
HTTP client and the caches are rebuilt on the other side.
"""

from __future__ import annotations

import base64
import contextlib
import decimal
import io
import json
from typing import Any
from urllib.parse import quote

import httpx
from kio.serial.readers import read_signed_varint

from odradek.pipeline.avro_values import CONFLUENT_MAGIC, _jsonable
from odradek.pipeline.jsontypes import STRUCT, JType
from odradek.pipeline.schema_mapping import (
    UnsupportedSchema,
    avro_names,
    avro_type,
    has_complex_union,
    json_schema_type,
    merge_declared,
    protobuf_type,
    tag_unions,
)

Decoded = tuple[str | None, str | None]


def _exact(value: Any) -> Any:
    """A decimal as its exact digits (text the load casts into the decimal column: a
    double would round it); anything else as the plain Avro path renders it."""
    if isinstance(value, decimal.Decimal):
        return str(value)
    return _jsonable(value)


class SchemaLookupError(Exception):
    pass


class FramedDecoder:
    def __init__(self, registry_url: str, timeout: float = 10.0) -> None:
        self.registry_url = registry_url.rstrip("/")
        self.timeout = timeout
        self._http: httpx.Client | None = None
        self._readers: dict[int, Any] = {}  # schema id -> callable(body) -> json text
        self._types: dict[int, JType] = {}  # schema id -> its columns (schema_mapping)

    def __getstate__(self) -> dict[str, Any]:
        return {"registry_url": self.registry_url, "timeout": self.timeout, "_http": None,
                "_readers": {}, "_types": {}}

    def declared_type(self, schema_ids: list[int]) -> JType | None:
        """The lake's column types for a batch holding these ids: their registered
        schemas mapped (schema_mapping) and merged; ids the registry lacks are skipped
        (their records are quarantined). None when no id maps to a record."""
        types = []
        for schema_id in sorted(set(schema_ids)):
            try:
                self._reader(schema_id)
            except (SchemaLookupError, httpx.HTTPError, ValueError):
                continue
            t = self._types.get(schema_id)
            if t is not None and t.kind == STRUCT:
                types.append(t)
        return merge_declared(types)

    def _get(self, path: str, **params: str) -> Any:
        if self._http is None:
            self._http = httpx.Client(timeout=self.timeout)
        answer = self._http.get(f"{self.registry_url}{path}", params=params)
        if answer.status_code == 404:
            raise SchemaLookupError(answer.json().get("message", "not found"))
        answer.raise_for_status()
        return answer.json()

    def decode(self, value: bytes | None) -> Decoded:
        if value is None:
            return None, None
        if len(value) < 5 or value[0] != CONFLUENT_MAGIC:
            return None, "not in Confluent's wire format (no magic byte and schema id)"
        schema_id = int.from_bytes(value[1:5], "big")
        try:
            reader = self._reader(schema_id)
        except SchemaLookupError:
            return None, f"schema id {schema_id} is not in the registry"
        except (httpx.HTTPError, ValueError) as e:
            return None, f"schema id {schema_id}: cannot use its schema: {e}"
        try:
            return reader(bytes(value[5:])), None
        except Exception as e:  # each format's decoder raises its own kinds on bad bytes
            return None, f"not a record of schema {schema_id}: {type(e).__name__}: {e}"

    def _reader(self, schema_id: int) -> Any:
        if schema_id not in self._readers:
            found = self._get(f"/schemas/ids/{schema_id}")
            kind = found.get("schemaType", "AVRO")
            if kind == "AVRO":
                self._readers[schema_id] = self._avro(schema_id, found)
            elif kind == "JSON":
                self._readers[schema_id] = self._json(schema_id, found)
            else:
                self._readers[schema_id] = self._protobuf(schema_id, found)
        return self._readers[schema_id]

    def _references(self, refs: list[dict[str, Any]], fmt: str | None,
                    seen: dict[str, Any]) -> None:
        """Every referenced schema, depth first, by its reference name."""
        for ref in refs:
            if ref["name"] in seen:
                continue
            params = {"format": fmt} if fmt else {}
            subject = quote(str(ref["subject"]), safe="")  # Protobuf ones hold slashes
            found = self._get(f"/subjects/{subject}/versions/{ref['version']}", **params)
            self._references(found.get("references") or [], fmt, seen)
            seen[ref["name"]] = found

    def _avro(self, schema_id: int, found: dict[str, Any]) -> Any:
        from fastavro import parse_schema, schemaless_reader

        named: dict[str, Any] = {}
        raw_named: dict[str, Any] = {}
        refs: dict[str, Any] = {}
        self._references(found.get("references") or [], None, refs)
        tagged = False
        for ref in refs.values():
            raw = json.loads(ref["schema"])
            parse_schema(raw, named_schemas=named)
            self._map(schema_id, lambda raw=raw: avro_type(raw, raw_named))
            tagged = tagged or has_complex_union(raw)
        raw = json.loads(found["schema"])
        parsed = parse_schema(raw, named_schemas=named)
        self._map(schema_id, lambda: avro_type(raw, raw_named))
        # a value in a union of several types lands in its branch's field (schema_mapping)
        tagged = tagged or has_complex_union(raw)
        names = avro_names([*(json.loads(r["schema"]) for r in refs.values()), raw])

        def read(body: bytes) -> str:
            stream = io.BytesIO(body)
            record = schemaless_reader(stream, parsed, None, return_record_name=tagged)
            if stream.tell() != len(body):
                raise ValueError(f"{len(body) - stream.tell()} bytes left over")
            if tagged:
                record = tag_unions(record, raw, names)
            return json.dumps(record, default=_exact, separators=(",", ":"))
        return read

    def _map(self, schema_id: int, mapping: Any) -> None:
        """The id's column types, or none (the lake infers them) when they have no form."""
        try:
            self._types[schema_id] = mapping()
        except (UnsupportedSchema, KeyError, TypeError, ValueError):
            self._types.pop(schema_id, None)

    def _json(self, schema_id: int, found: dict[str, Any]) -> Any:
        import jsonschema

        schema = json.loads(found["schema"])
        self._map(schema_id, lambda: json_schema_type(schema))
        validator_class = jsonschema.validators.validator_for(schema, jsonschema.Draft7Validator)
        validator = validator_class(schema)

        def read(body: bytes) -> str:
            document = json.loads(body)
            validator.validate(document)
            return json.dumps(document, separators=(",", ":"))
        return read

    def _protobuf(self, schema_id: int, found: dict[str, Any]) -> Any:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        from google.protobuf.json_format import MessageToDict

        serialized = self._get(f"/schemas/ids/{schema_id}", format="serialized")
        refs: dict[str, Any] = {}
        self._references(serialized.get("references") or [], "serialized", refs)
        pool = descriptor_pool.DescriptorPool()
        for name, ref in refs.items():
            fdp = descriptor_pb2.FileDescriptorProto.FromString(
                base64.b64decode(ref["schema"]))
            fdp.name = name
            pool.Add(fdp)
        main = descriptor_pb2.FileDescriptorProto.FromString(
            base64.b64decode(serialized["schema"]))
        main.name = f"odradek-schema-{schema_id}.proto"
        _add_well_known(pool, main)
        pool.Add(main)
        if main.message_type:  # the batch's columns: the first message's (index [0])
            first = ".".join(filter(None, [main.package, main.message_type[0].name]))
            self._map(schema_id, lambda: protobuf_type(pool.FindMessageTypeByName(first)))

        def read(body: bytes) -> str:
            indexes, offset = _message_indexes(body)
            messages = list(main.message_type)
            path = [messages[indexes[0]].name]
            nested = messages[indexes[0]]
            for i in indexes[1:]:
                nested = nested.nested_type[i]
                path.append(nested.name)
            full = ".".join([main.package, *path] if main.package else path)
            cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(full))
            message = cls.FromString(body[offset:])
            return json.dumps(MessageToDict(message, preserving_proto_field_name=True),
                              separators=(",", ":"))
        return read


def _add_well_known(pool: Any, fdp: Any) -> None:
    """google/protobuf/*.proto imports come from protobuf's own descriptors."""
    import importlib

    from google.protobuf import descriptor_pb2

    for dep in fdp.dependency:
        if dep.startswith("google/protobuf/"):
            module = importlib.import_module(
                "google.protobuf." + dep.removeprefix("google/protobuf/")
                .removesuffix(".proto") + "_pb2")
            proto = descriptor_pb2.FileDescriptorProto()
            module.DESCRIPTOR.CopyToProto(proto)
            with contextlib.suppress(TypeError):  # already in the pool
                pool.Add(proto)


def _message_indexes(body: bytes) -> tuple[list[int], int]:
    """Confluent's message-index array before a Protobuf body: [0] is written as one 0."""
    count, offset = read_signed_varint(body, 0)
    if count == 0:
        return [0], offset
    indexes = []
    for _ in range(count):
        index, n = read_signed_varint(body, offset)
        indexes.append(int(index))
        offset += n
    return indexes, offset
