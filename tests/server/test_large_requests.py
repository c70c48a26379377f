"""A huge request does not hold the event loop: a Metadata request naming 150,000 topics
(about 4 MB) is decoded and encoded in a thread and answered in slices, while another
client's ApiVersions keep being answered (before: every other client waited ~9 s)."""

from __future__ import annotations

import socket
import struct
import sys
import threading
import time

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import decode_response, encode_request, request_class
from tests.conftest import BrokerProcess
from tests.wire import WireClient

TOPICS = 150_000


def _read_frame(sock: socket.socket) -> bytes:
    def exact(n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return bytes(out)

    (size,) = struct.unpack(">i", exact(4))
    return exact(size)


def test_a_metadata_request_naming_150000_topics_does_not_stall_others(
        broker: BrokerProcess) -> None:
    module = sys.modules[request_class(3, 12).__module__]
    body = request_class(3, 12)(
        topics=tuple(module.MetadataRequestTopic(topic_id=None, name=f"none-{i:07d}")
                     for i in range(TOPICS)),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    frame = encode_request(3, 12, 1, "big", body)
    answer: list[bytes] = []
    big = socket.create_connection(("127.0.0.1", broker.port), timeout=120)
    try:
        with WireClient(broker.bootstrap, timeout=30) as w:
            w.call(18, 3, client_software_name="t", client_software_version="1")
            reader = threading.Thread(target=lambda: answer.append(_read_frame(big)))
            big.sendall(frame)
            reader.start()
            worst = 0.0
            while reader.is_alive():
                started = time.monotonic()
                w.call(18, 3, client_software_name="t", client_software_version="1")
                worst = max(worst, time.monotonic() - started)
            reader.join()
    finally:
        big.close()
    response = decode_response(3, 12, answer[0], 5)
    assert len(response.topics) == TOPICS
    assert {t.error_code for t in response.topics} == {ErrorCode.unknown_topic_or_partition}
    assert worst < 4.0, f"another client waited {worst:.1f}s"
