"""The client side of Kafka's framing, fed bytes: request frames, stream splitting,
response headers v0 and v1, correlation checks."""

from __future__ import annotations

import datetime
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from odradek.protocol.client_framing import (
    ClientFraming,
    CorrelationMismatch,
    FrameSplitter,
    decode_response,
    frame_size,
    response_body_offset,
)
from odradek.protocol.headers import read_request_header
from odradek.protocol.messages import (
    decode_request,
    encode_response,
    is_flexible_request,
    request_class,
    response_class,
)

METADATA, API_VERSIONS, FIND_COORDINATOR = 3, 18, 10


@pytest.mark.parametrize(
    ("api_key", "version", "fields"),
    [
        (METADATA, 4, {"topics": None}),  # request header v1; then v2 (tagged fields)
        (METADATA, 12, {"topics": None, "include_topic_authorized_operations": False}),
        (API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"}),
    ],
)
def test_request_frames_carry_the_header_version_the_api_version_needs(
    api_key: int, version: int, fields: dict[str, object]
) -> None:
    framing = ClientFraming("me")
    body = request_class(api_key, version)(**fields)
    first, _ = framing.build(api_key, version, **fields)
    cid, frame = framing.request(api_key, version, body)
    assert cid == first + 1
    assert frame_size(frame) == len(frame) - 4
    header, pos = read_request_header(frame[4:], is_flexible_request(api_key, version))
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        api_key, version, cid, "me")  # fmt: skip
    assert decode_request(api_key, version, frame[4:], pos) == body


def _response(api_key: int, version: int, cid: int, **fields: object) -> bytes:
    return encode_response(api_key, version, cid, response_class(api_key, version)(**fields))


@pytest.mark.parametrize("version", [1, 4])  # header v0, then v1 with tagged fields
def test_responses_decode_after_their_header(version: int) -> None:
    frame = _response(FIND_COORDINATOR, version, 7, **_coordinator_fields(version))[4:]
    got = decode_response(FIND_COORDINATOR, version, frame, 7)
    assert got == response_class(FIND_COORDINATOR, version)(**_coordinator_fields(version))
    with pytest.raises(CorrelationMismatch):
        decode_response(FIND_COORDINATOR, version, frame, 8)


def _coordinator_fields(version: int) -> dict[str, object]:
    wait = datetime.timedelta(milliseconds=5)
    if version >= 4:
        return {"throttle_time": wait, "coordinators": ()}
    return {"throttle_time": wait, "error_code": ErrorCode.none, "error_message": None,
            "node_id": 1, "host": "h", "port": 9092}


def test_response_header_tagged_fields_are_skipped() -> None:
    frame = struct.pack(">i", 5) + bytes([1, 3, 2, 0xAA, 0xBB]) + b"body"
    assert frame[response_body_offset(FIND_COORDINATOR, 4, frame):] == b"body"


@settings(max_examples=100, deadline=None)
@given(frames=st.lists(st.binary(max_size=300), max_size=6), cuts=st.lists(st.integers(1, 50)))
def test_a_stream_splits_into_its_frames_however_it_arrives(
    frames: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    splitter, got, pos = FrameSplitter(), [], 0
    for n in [*cuts, len(stream)]:
        assert splitter.wanted >= 1
        splitter.feed(stream[pos : pos + n])
        pos += n
        while (frame := splitter.next_frame()) is not None:
            got.append(frame)
    assert got == frames


def test_a_negative_frame_size_is_refused() -> None:
    splitter = FrameSplitter()
    splitter.feed(struct.pack(">i", -1))
    with pytest.raises(ConnectionError):
        splitter.next_frame()
