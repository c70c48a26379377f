"""DescribeProducers (61) for partitions a broker cannot describe, answered as Kafka's
handler answers them; driven through the request pipeline with fake ports."""

from __future__ import annotations

import sys
import uuid
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from odradek.cluster.metadata import PartitionInfo, TopicInfo
from odradek.protocol.errors import ErrorCode, UnknownTopicOrPartition
from odradek.protocol.messages import request_class
from tests.server import test_handler_units as units


class Replicas:
    """Hosts t-0 (healthy) and t-1 (on a failed log dir); t-2 lives elsewhere."""

    def __init__(self) -> None:
        state = SimpleNamespace(producers={})
        self.partitions: dict[tuple[str, int], Any] = {
            ("t", 0): SimpleNamespace(log=SimpleNamespace(offline=False,
                                                          producer_state=state)),
            ("t", 1): SimpleNamespace(log=SimpleNamespace(offline=True,
                                                          producer_state=state)),
        }

    def get(self, topic: str, index: int) -> Any:
        try:
            return self.partitions[(topic, index)]
        except KeyError:
            raise UnknownTopicOrPartition(f"{topic}-{index}") from None


def test_each_partition_gets_kafkas_error() -> None:
    metadata = units.FakeMetadata()
    parts = tuple(PartitionInfo(i, 1, 0, (1, 2), (1, 2)) for i in range(3))
    metadata.image.topics["t"] = TopicInfo("t", uuid.uuid4(), parts, {})
    pipeline = units._pipeline(metadata)
    pipeline.ports = replace(pipeline.ports, replicas=Replicas())  # type: ignore[arg-type]
    schema = sys.modules[request_class(61, 0).__module__]
    r = units._call(pipeline, 61, 0, topics=(
        schema.TopicRequest(name="t", partition_indexes=(0, 1, 2, 3, -1)),
        schema.TopicRequest(name="nope", partition_indexes=(0,))))
    codes = [[(p.partition_index, p.error_code) for p in t.partitions] for t in r.topics]
    assert codes == [
        [(0, ErrorCode.none), (1, ErrorCode.kafka_storage_error),
         (2, ErrorCode.not_leader_or_follower), (3, ErrorCode.unknown_topic_or_partition),
         (-1, ErrorCode.unknown_topic_or_partition)],
        [(0, ErrorCode.unknown_topic_or_partition)]]
