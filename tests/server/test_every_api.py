"""Every API the broker serves, at every version it advertises, answers a request —
a well-formed one whose names and numbers mean little — with a response a client can
decode, never a dropped connection and never UNKNOWN_SERVER_ERROR (which would mean a
handler raised: a bug). The error response of every API is also built and encoded at
every version, as the pipeline sends it when a handler fails."""

from __future__ import annotations

import datetime
import struct
import typing
import uuid
from dataclasses import fields, is_dataclass, replace
from typing import Any

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import (
    decode_response,
    encode_request,
    encode_response,
    request_class,
    response_class,
)
from odradek.server.error_responses import error_response
from odradek.server.handlers import HANDLERS
from tests.clients.test_confluent_kafka import create_topic
from tests.conftest import BrokerProcess
from tests.wire import WireClient

# Requests that change what later ones see go last.
_LAST = (20, 21, 42, 47)
_CASES = [(k, v) for k in sorted(HANDLERS, key=lambda k: (k in _LAST, k))
          for v in range(HANDLERS[k].min_version, HANDLERS[k].max_version + 1)]


def sample(cls: type, topic: str) -> Any:
    """An instance of a kio entity with every list holding one item."""
    hints = typing.get_type_hints(cls)
    return cls(**{f.name: _value(f.name, hints[f.name], topic) for f in fields(cls)})


def _value(name: str, tp: Any, topic: str) -> Any:
    origin = typing.get_origin(tp)
    if origin is tuple:
        return (_value(name, typing.get_args(tp)[0], topic),)
    if origin is not None:  # X | None
        return _value(name, next(a for a in typing.get_args(tp) if a is not type(None)),
                      topic)
    if isinstance(tp, type):
        if issubclass(tp, bool):
            return False
        if issubclass(tp, int):
            return 0
        if issubclass(tp, float):
            return 0.0
        if issubclass(tp, str):
            return topic
        if issubclass(tp, bytes):
            return b""
        if issubclass(tp, datetime.timedelta):
            return datetime.timedelta(milliseconds=10)
        if issubclass(tp, datetime.datetime):
            return datetime.datetime.now(datetime.UTC)
        if issubclass(tp, uuid.UUID):
            return uuid.UUID(int=7)
        if is_dataclass(tp):
            return sample(tp, topic)
    return None


def _error_codes(node: Any) -> list[int]:
    out: list[int] = []
    if isinstance(node, tuple):
        for item in node:
            out += _error_codes(item)
    elif is_dataclass(node):
        for f in fields(node):
            value = getattr(node, f.name)
            if f.name.endswith("error_code"):
                out.append(int(getattr(value, "value", value)))
            else:
                out += _error_codes(value)
    return out


@pytest.mark.parametrize(("api_key", "version"), _CASES)
def test_error_response_encodes_at_every_version(api_key: int, version: int) -> None:
    request = sample(request_class(api_key, version), "t")
    body = error_response(api_key, version, request, ErrorCode.not_leader_or_follower, "x")
    if body is None:
        pytest.skip("Kafka closes the connection: no error response at this version")
    encode_response(api_key, version, 1, body)
    codes = _error_codes(body)
    assert set(codes) <= {ErrorCode.not_leader_or_follower.value}, body
    assert codes or api_key == 35, body  # DescribeLogDirs < v3 answers with no dirs


def test_every_api_answers_at_every_version_without_a_server_error(
        broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=1)
    failures = []
    with WireClient(broker.bootstrap) as w:
        for correlation, (api_key, version) in enumerate(_CASES, start=1):
            body = sample(request_class(api_key, version), topic_name)
            if api_key == 0:
                body = replace(body, acks=1)  # acks=0 owes no response
            w.send_raw(encode_request(api_key, version, correlation, "every-api", body))
            frame = w.read_frame()  # a dropped connection fails here
            assert struct.unpack_from(">i", frame, 0)[0] == correlation
            offset = 5 if response_class(api_key, version).__header_schema__.__flexible__ \
                else 4
            response = decode_response(api_key, version, frame, offset)
            if ErrorCode.unknown_server_error.value in _error_codes(response):
                failures.append(f"api {api_key} v{version}")
    assert not failures, f"handlers raised for: {', '.join(failures)} (see the broker log)"
