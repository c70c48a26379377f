"""Malformed requests to the APIs added for Kafka 4.x conformance (UpdateFeatures,
GetTelemetrySubscriptions, PushTelemetry, ListConfigResources, DescribeTopicPartitions):
a body cut short or with its counts and lengths corrupted closes the connection, as
Kafka does with a request it cannot parse, and the broker keeps serving."""

from __future__ import annotations

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import encode_request, request_class
from tests.conftest import BrokerProcess
from tests.server.test_every_api import sample
from tests.wire import WireClient

NEW_APIS = [(57, 2), (71, 0), (72, 0), (74, 1), (75, 0)]


@pytest.mark.parametrize(("api_key", "version"), NEW_APIS)
def test_cut_short_or_corrupted_bodies_close_the_connection(
        broker: BrokerProcess, api_key: int, version: int) -> None:
    frame = encode_request(api_key, version, 9, "bad", sample(request_class(api_key, version),
                                                                "t"))
    size = len(frame) - 4
    header_end = 4 + 2 + 2 + 4 + 2 + len("bad") + 1  # size, key, version, id, client id, tags
    bad = [frame[:4] + frame[4:cut] for cut in range(header_end + 1, len(frame))]
    bad = [(len(b) - 4).to_bytes(4, "big") + b[4:] for b in bad]
    bad.append(frame[:header_end] + b"\xff" * (size + 4 - header_end))  # huge counts
    for data in bad:
        with WireClient(broker.bootstrap) as w:
            w.send_raw(data)
            with pytest.raises(ConnectionError):
                w.read_frame()
    with WireClient(broker.bootstrap) as w:  # still serving
        assert w.call(18, 3, client_software_name="t",
                      client_software_version="1").error_code == ErrorCode.none
