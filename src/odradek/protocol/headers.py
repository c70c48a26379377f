"""Request headers, parsed by hand: they sit in front of every request on the hot path.

Header v1 (non-flexible requests): api_key i16, api_version i16, correlation_id i32,
client_id nullable string (i16 length). Header v2 (flexible requests) adds tagged
fields; client_id keeps the i16-length encoding in both, as Kafka specifies.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kio.serial.readers import read_unsigned_varint

from odradek.protocol.errors import InvalidRequest

_FIXED = struct.Struct(">hhih")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_ids(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a frame, to answer even unparseable ones."""
    if len(frame) < 8:
        raise InvalidRequest("request shorter than its header")
    api_key, api_version, correlation_id, _ = _FIXED.unpack_from(bytes(frame[:8]) + b"\0\0")
    return api_key, api_version, correlation_id


def skip_tagged_fields(buf: bytes | bytearray | memoryview, pos: int) -> int:
    """The position after a tagged-field section (a header's, in flexible versions)."""
    count, n = read_unsigned_varint(buf, pos)
    pos += n
    for _ in range(count):
        _tag, n = read_unsigned_varint(buf, pos)
        pos += n
        size, n = read_unsigned_varint(buf, pos)
        pos += n + size
    return pos


def read_request_header(
    frame: bytes | memoryview, flexible: bool
) -> tuple[RequestHeader, int]:
    """Parse the header of a request frame (without its size prefix).

    Returns the header and the offset where the body starts.
    """
    try:
        api_key, api_version, correlation_id, client_len = _FIXED.unpack_from(frame, 0)
        pos = _FIXED.size
        client_id: str | None = None
        if client_len >= 0:
            if pos + client_len > len(frame):
                raise InvalidRequest("client id truncated")
            client_id = bytes(frame[pos : pos + client_len]).decode("utf-8", "replace")
            pos += client_len
        if flexible:
            pos = skip_tagged_fields(frame, pos)
        if pos > len(frame):
            raise InvalidRequest("request header truncated")
    except (struct.error, ValueError, IndexError) as e:
        raise InvalidRequest(f"malformed request header: {e}") from e
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos
