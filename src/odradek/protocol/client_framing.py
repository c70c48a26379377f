"""Kafka's framing as a client sees it, with no I/O: the one home of what every raw
client of ours (the CLI's raw calls, the replica fetcher, the tests) needs.

A request frame is `size i32 · request header · body`; the header is v1 for
non-flexible request versions and v2 (with tagged fields) for flexible ones, as the
message's kio schema says. A response frame is `size i32 · correlation id i32 ·
[tagged fields, for flexible response versions but ApiVersions] · body`. Callers own
their sockets: they send `ClientFraming.request(...)`'s bytes, feed what they receive
to a `FrameSplitter` (or read the size prefix themselves with `frame_size`) and hand
each frame to `decode_response`.
"""

from __future__ import annotations

import struct
from typing import Any

from odradek.protocol.headers import skip_tagged_fields
from odradek.protocol.messages import decode_response as _decode_body
from odradek.protocol.messages import encode_request, request_class, response_class

__all__ = [
    "SIZE_PREFIX",
    "ClientFraming",
    "CorrelationMismatch",
    "FrameSplitter",
    "decode_response",
    "frame_size",
    "response_body_offset",
]

SIZE_PREFIX = 4
_I32 = struct.Struct(">i")


class CorrelationMismatch(ConnectionError):
    """A response that answers another request: the stream is out of step."""


class ClientFraming:
    """One connection's request side: correlation ids and request frames."""

    def __init__(self, client_id: str | None) -> None:
        self.client_id = client_id
        self._correlation_id = 0

    def request(self, api_key: int, version: int, body: Any) -> tuple[int, bytes]:
        """(correlation id, whole request frame) of the next request."""
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        cid = self._correlation_id
        return cid, encode_request(api_key, version, cid, self.client_id, body)

    def build(self, api_key: int, version: int, **fields: Any) -> tuple[int, bytes]:
        """`request` with the body built from keyword fields."""
        return self.request(api_key, version, request_class(api_key, version)(**fields))


def frame_size(prefix: bytes | bytearray | memoryview) -> int:
    """The size a frame's 4-byte prefix announces; ConnectionError if it is negative."""
    (size,) = _I32.unpack_from(prefix)
    if size < 0:
        raise ConnectionError(f"frame size {size} is negative")
    return int(size)


class FrameSplitter:
    """Cuts a received byte stream into frames (their size prefixes removed)."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._buf += data

    def next_frame(self) -> bytes | None:
        """The next whole frame, or None until more bytes are fed."""
        if len(self._buf) < SIZE_PREFIX:
            return None
        end = SIZE_PREFIX + frame_size(self._buf)
        if len(self._buf) < end:
            return None
        frame = bytes(self._buf[SIZE_PREFIX:end])
        del self._buf[:end]
        return frame

    @property
    def wanted(self) -> int:
        """Bytes still missing from the next frame (a receive size, at least 1)."""
        if len(self._buf) < SIZE_PREFIX:
            return SIZE_PREFIX - len(self._buf)
        return max(1, SIZE_PREFIX + frame_size(self._buf) - len(self._buf))


def response_body_offset(api_key: int, version: int, frame: bytes | bytearray | memoryview
                         ) -> int:
    """Where the body starts in a response frame (without its size prefix): after the
    correlation id and, in response header v1, the header's tagged fields."""
    if response_class(api_key, version).__header_schema__.__flexible__:
        return skip_tagged_fields(frame, _I32.size)
    return _I32.size


def correlation_id(frame: bytes | bytearray | memoryview) -> int:
    return int(_I32.unpack_from(frame)[0])


def decode_response(
    api_key: int, version: int, frame: bytes | bytearray | memoryview,
    expected_correlation_id: int
) -> Any:
    """The response body of a frame (without its size prefix), checked to answer the
    request with `expected_correlation_id`."""
    got = correlation_id(frame)
    if got != expected_correlation_id:
        raise CorrelationMismatch(f"correlation id {got} != {expected_correlation_id}")
    return _decode_body(api_key, version, frame, response_body_offset(api_key, version, frame))
