"""Request and response message schemas, by (api key, version), through kio.

kio generates one frozen dataclass per message and version from Kafka's own JSON
message definitions; we cache the class, reader and writer per (api, version) because
resolving them costs far more than decoding a message.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.index import UnknownAPIKey, UnknownEntity, load_entity_module
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from odradek.protocol import bounds
from odradek.protocol.errors import InvalidRequest, UnsupportedVersion

Message = Any  # a kio entity; kio's classes share no common base type
Reader = Callable[[Any, int], tuple[Message, int]]


def api_name(api_key: int) -> str:
    return api_key_map.get(api_key, f"api_{api_key}")


def _hand_written() -> dict[tuple[int, int, EntityType], type[Message]]:
    """Versions kio has no schema for (Kafka 4 dropped them) that old clients still send."""
    from odradek.protocol import list_offsets_v0

    return {
        (2, 0, EntityType.request): list_offsets_v0.ListOffsetsRequest,
        (2, 0, EntityType.response): list_offsets_v0.ListOffsetsResponse,
    }


@cache
def _entity_class(api_key: int, version: int, entity_type: EntityType) -> type[Message]:
    extra = _hand_written().get((api_key, version, entity_type))
    if extra is not None:
        return extra
    try:
        name = api_key_map[api_key]
        module = load_entity_module(name, version, entity_type)  # type: ignore[arg-type]
        path = schema_name_map[name][version][entity_type]  # type: ignore[index]
    except (KeyError, UnknownAPIKey, UnknownEntity) as e:
        raise UnsupportedVersion(f"no schema for api {api_key} v{version}") from e
    cls: type[Message] = getattr(module, path.split(":", 1)[1])
    return cls


def request_class(api_key: int, version: int) -> type[Message]:
    return _entity_class(api_key, version, EntityType.request)


def response_class(api_key: int, version: int) -> type[Message]:
    return _entity_class(api_key, version, EntityType.response)


_readers: dict[type, Reader] = {}
_writers: dict[type, Callable[[Any, Message], None]] = {}


def _reader(cls: type[Message]) -> Reader:
    reader = _readers.get(cls)
    if reader is None:
        reader = _readers[cls] = entity_reader(cls)
    return reader


def _writer(cls: type[Message]) -> Callable[[Any, Message], None]:
    writer = _writers.get(cls)
    if writer is None:
        writer = _writers[cls] = entity_writer(cls)
    return writer


def is_flexible_request(api_key: int, version: int) -> bool:
    return bool(request_class(api_key, version).__flexible__)


def decode_request(api_key: int, version: int, buf: Any, offset: int) -> Message:
    """Decode a request body; raises InvalidRequest for bytes that do not parse."""
    cls = request_class(api_key, version)
    bounds.check(cls, buf, offset)  # before kio reserves memory for a count on the wire
    try:
        message, _ = _reader(cls)(buf, offset)
    except Exception as e:  # kio raises several error types for bad bytes
        raise InvalidRequest(f"malformed {api_name(api_key)} v{version} request: {e}") from e
    return message


def decode_response(api_key: int, version: int, buf: Any, offset: int = 0) -> Message:
    """Decode a response body (used by tests and the replica fetcher)."""
    message, _ = _reader(response_class(api_key, version))(buf, offset)
    return message


_I32 = struct.Struct(">i")


def encode_response(api_key: int, version: int, correlation_id: int, body: Message) -> bytes:
    """A whole response frame: size prefix, response header, body.

    The header version follows the body's schema: v1 (with tagged fields) for flexible
    versions, v0 otherwise, and always v0 for ApiVersions so that any client can read it.
    """
    cls = type(body)
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    buf.write(_I32.pack(correlation_id))
    if cls.__header_schema__.__flexible__:
        buf.write(b"\0")  # no tagged fields in the response header
    _writer(cls)(buf, body)
    frame = buf.getbuffer()
    _I32.pack_into(frame, 0, len(frame) - 4)
    del frame
    return buf.getvalue()


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: Message
) -> bytes:
    """A whole request frame (for tests, tools and replica fetchers)."""
    cls = type(body)
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    header = cls.__header_schema__(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    _writer(type(header))(buf, header)
    _writer(cls)(buf, body)
    frame = buf.getbuffer()
    _I32.pack_into(frame, 0, len(frame) - 4)
    del frame
    return buf.getvalue()
