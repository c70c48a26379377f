"""Schema formats by Confluent's `schemaType`: AVRO (the default), JSON, PROTOBUF."""

from __future__ import annotations

from odradek.registry.errors import InvalidSchema
from odradek.registry.formats.avro_format import AvroSchema
from odradek.registry.formats.base import ParsedSchema, Reference, ResolvedReference
from odradek.registry.formats.json_format import JsonSchema
from odradek.registry.formats.protobuf_format import ProtobufSchema

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")

__all__ = ["SCHEMA_TYPES", "ParsedSchema", "Reference", "ResolvedReference", "parse_schema"]


def parse_schema(schema_type: str, text: str,
                 refs: tuple[ResolvedReference, ...] = ()) -> ParsedSchema:
    if schema_type == "AVRO":
        return AvroSchema(text, refs)
    if schema_type == "JSON":
        return JsonSchema(text, refs)
    if schema_type == "PROTOBUF":
        return ProtobufSchema(text, refs)
    raise InvalidSchema(f"Invalid schema type {schema_type}")
