"""Random and mutated frames at a live broker: it answers, closes, or ignores — never dies."""

from __future__ import annotations

import random
import socket
import struct

from odradek.protocol.messages import encode_request, request_class
from tests.clients.test_confluent_kafka import create_topic
from tests.conftest import BrokerProcess
from tests.server.test_wire import produce
from tests.wire import WireClient


def _seed_frames(topic: str) -> list[bytes]:
    from odradek.protocol.records import NewRecord, encode_batch

    frames = []
    md = request_class(3, 12)
    frames.append(encode_request(3, 12, 1, "fuzz", md(topics=None,
                                                      allow_auto_topic_creation=False,
                                                      include_topic_authorized_operations=False)))
    frames.append(encode_request(18, 3, 2, "fuzz", request_class(18, 3)(
        client_software_name="fuzz", client_software_version="0")))
    p = request_class(0, 9)
    import datetime
    import sys

    ps = sys.modules[p.__module__]
    frames.append(encode_request(0, 9, 3, "fuzz", p(
        transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=1),
        topic_data=(ps.TopicProduceData(name=topic, partition_data=(
            ps.PartitionProduceData(index=0, records=encode_batch(
                [NewRecord(value=b"fuzz")])),)),))))
    return frames


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame)
    choice = rng.randrange(5)
    if choice == 0:  # flip bytes after the size prefix
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(4, len(data))
            data[i] = rng.randrange(256)
    elif choice == 1:  # truncate the body but keep a consistent size prefix
        cut = rng.randrange(8, len(data))
        data = data[:cut]
        struct.pack_into(">i", data, 0, len(data) - 4)
    elif choice == 2:  # random garbage body
        body = rng.randbytes(rng.randint(0, 200))
        data = bytearray(struct.pack(">i", len(body)) + body)
    elif choice == 3:  # absurd size prefix
        struct.pack_into(">i", data, 0, rng.choice([-1, 2**31 - 1, 200_000_000]))
    else:  # random api key and version in a valid frame
        struct.pack_into(">hh", data, 4, rng.randrange(-5, 100), rng.randrange(-2, 30))
    return bytes(data)


def test_broker_survives_fuzzed_frames(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    rng = random.Random(1234)
    seeds = _seed_frames(topic_name)
    host, port = broker.bootstrap.split(":")
    for _ in range(400):
        frame = _mutate(rng, rng.choice(seeds))
        with socket.create_connection((host, int(port)), timeout=2) as s:
            try:
                s.sendall(frame)
                s.settimeout(0.2)
                s.recv(65536)
            except OSError:
                pass
    assert broker.alive()
    # and it still serves real work, with nothing corrupted in the log
    from odradek.protocol.errors import ErrorCode
    from odradek.protocol.records import NewRecord, decode_batches, encode_batch

    with WireClient(broker.bootstrap) as c:
        code, _ = produce(c, topic_name, encode_batch([NewRecord(value=b"after")]))
        assert code == ErrorCode.none
    from tests.server.test_wire import fetch_all

    with WireClient(broker.bootstrap) as c:
        values = fetch_all(c, topic_name)
    assert values[-1] == b"after"
    assert set(values) <= {b"fuzz", b"after"}
    _ = decode_batches
