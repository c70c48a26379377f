"""Metadata's encoded topic entries (server/metadata_cache.py): every version's answer
is byte for byte what the whole response encodes to, and a topic's change shows in the
next answer."""

from __future__ import annotations

from typing import Any

from confluent_kafka.admin import AdminClient, NewPartitions

from odradek.protocol.client_framing import decode_response
from odradek.protocol.messages import encode_response
from tests.clients.test_confluent_kafka import create_topic
from tests.conftest import BrokerProcess
from tests.wire import WireClient

METADATA = 3


def full_metadata(c: WireClient, version: int) -> tuple[Any, bytes, int]:
    """(decoded response, frame without its size prefix, correlation id)."""
    kwargs: dict[str, object] = {"topics": () if version == 0 else None}
    if version >= 4:
        kwargs["allow_auto_topic_creation"] = False
    if version >= 8:
        kwargs["include_topic_authorized_operations"] = False
    if 8 <= version <= 10:
        kwargs["include_cluster_authorized_operations"] = False
    cid, request = c.framing.build(METADATA, version, **kwargs)
    c.send_raw(request)
    frame = c.read_frame()
    return decode_response(METADATA, version, frame, cid), frame, cid


def partitions_of(resp: Any, topic: str) -> list[int]:
    return sorted(p.partition_index for t in resp.topics if t.name == topic
                  for p in t.partitions)


def test_every_version_is_the_whole_response_encoded(broker: BrokerProcess,
                                                     topic_name: str) -> None:
    for i, n in enumerate((1, 3, 7)):
        create_topic(broker.bootstrap, f"{topic_name}-{i}", partitions=n)
    with WireClient(broker.bootstrap) as c:
        for version in range(14):
            for _ in range(2):  # built, then from the cache
                resp, frame, cid = full_metadata(c, version)
                assert partitions_of(resp, f"{topic_name}-2") == list(range(7)), version
                whole = encode_response(METADATA, version, cid, resp)
                assert bytes(frame) == whole[4:], f"Metadata v{version} differs from kio's"


def test_a_topic_change_shows_in_the_next_answer(broker: BrokerProcess,
                                                 topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with WireClient(broker.bootstrap) as c:
        assert partitions_of(full_metadata(c, 12)[0], topic_name) == [0, 1]
        admin.create_partitions([NewPartitions(topic_name, 5)])[topic_name].result(30)
        assert partitions_of(full_metadata(c, 12)[0], topic_name) == [0, 1, 2, 3, 4]
        admin.delete_topics([topic_name])[topic_name].result(30)
        names = [t.name for t in full_metadata(c, 12)[0].topics]
        assert topic_name not in names
