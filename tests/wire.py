"""A tiny raw Kafka client for tests that must send exact bytes (odradek's own codecs).

The framing is protocol/client_framing.py's; this holds only the socket."""

from __future__ import annotations

import socket
import sys
from typing import Any

from odradek.protocol.client_framing import ClientFraming, FrameSplitter, decode_response
from odradek.protocol.messages import request_class


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.framing = ClientFraming("wire-test")
        self._frames = FrameSplitter()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        """The next response frame, without its size prefix."""
        while (frame := self._frames.next_frame()) is None:
            chunk = self.sock.recv(max(self._frames.wanted, 65536))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            self._frames.feed(chunk)
        return frame

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        """Send a request built from keyword fields; return the decoded response."""
        correlation_id, request = self.framing.build(api_key, version, **fields)
        self.send_raw(request)
        return decode_response(api_key, version, self.read_frame(), correlation_id)

    def schema(self, api_key: int, version: int) -> Any:
        return sys.modules[request_class(api_key, version).__module__]
