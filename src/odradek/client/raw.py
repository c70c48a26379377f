"""One raw Kafka request over its own connection, for the requests confluent-kafka
has no binding for (OffsetDelete, DescribeProducers, ListTransactions…). The framing
is protocol/client_framing.py's; only the socket is here. Plain connections only: a
TLS or SASL listener cannot be asked this way."""

from __future__ import annotations

import socket
import sys
from types import ModuleType
from typing import Any

from odradek.protocol.client_framing import ClientFraming, FrameSplitter, decode_response
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import request_class

TIMEOUT_S = 30


def call_raw(address: tuple[str, int], api_key: int, version: int, body: Any,
             client_id: str) -> tuple[int, bytes]:
    """(correlation id, response frame without its size prefix) of one request."""
    cid, request = ClientFraming(client_id).request(api_key, version, body)
    splitter = FrameSplitter()
    with socket.create_connection(address, timeout=TIMEOUT_S) as s:
        s.sendall(request)
        while (frame := splitter.next_frame()) is None:
            chunk = s.recv(max(splitter.wanted, 65536))
            if not chunk:
                raise OSError("connection closed by the broker")
            splitter.feed(chunk)
    return cid, frame


def call(address: tuple[str, int], api_key: int, version: int, body: Any,
         client_id: str) -> Any:
    """The decoded response to one request."""
    cid, frame = call_raw(address, api_key, version, body, client_id)
    return decode_response(api_key, version, frame, cid)


def request(address: tuple[str, int], api_key: int, version: int, client_id: str,
            **fields: Any) -> Any:
    """Send one request built from keyword fields; the decoded response."""
    body = request_class(api_key, version)(**fields)
    return call(address, api_key, version, body, client_id)


def request_frame(address: tuple[str, int], api_key: int, version: int, client_id: str,
                  **fields: Any) -> bytes:
    """The response frame (correlation id onwards) of one request built from fields."""
    body = request_class(api_key, version)(**fields)
    return call_raw(address, api_key, version, body, client_id)[1]


def schema(api_key: int, version: int) -> ModuleType:
    """The module of a request's kio classes (for its nested types)."""
    return sys.modules[request_class(api_key, version).__module__]


def error_name(code: Any) -> str:
    """Kafka's name of an error code, as its tools print it."""
    return ErrorCode(int(code)).name.upper()
