"""A tiny raw Kafka client for tests that must send exact bytes (odradek's own codecs)."""

from __future__ import annotations

import socket
import struct
from typing import Any

from odradek.protocol.messages import decode_response, encode_request, request_class


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read_exact(4))[0]
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        """Send a request built from keyword fields; return the decoded response."""
        self.correlation_id += 1
        body = request_class(api_key, version)(**fields)
        self.send_raw(encode_request(api_key, version, self.correlation_id, "wire-test", body))
        frame = self.read_frame()
        (corr,) = struct.unpack_from(">i", frame, 0)
        assert corr == self.correlation_id
        offset = 4
        from odradek.protocol.messages import response_class

        if response_class(api_key, version).__header_schema__.__flexible__:
            offset += 1  # empty tagged fields
        return decode_response(api_key, version, frame, offset)

    def schema(self, api_key: int, version: int) -> Any:
        import sys

        return sys.modules[request_class(api_key, version).__module__]
