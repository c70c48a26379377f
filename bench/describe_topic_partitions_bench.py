"""DescribeTopicPartitions cost by topic size: `python bench/describe_topic_partitions_bench.py`.

One topic of 1, 1,000 and 10,000 partitions in a fake metadata image; each request goes
through the request pipeline (decode, handler, kio encode) as on a broker, paging with
the cursor at the default limit of 2,000 partitions a response. Prints ms per page and
for the whole topic, and the same topic through Metadata v12 for comparison (one
response, no limit). Nothing else runs: one core, no sockets.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `odradek` importable from src/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from odradek.cluster.metadata import BrokerInfo, MetadataImage, PartitionInfo, TopicInfo
from odradek.protocol.messages import decode_response, encode_request, request_class
from odradek.server.config import BrokerConfig
from odradek.server.metrics import BrokerMetrics
from odradek.server.pipeline import Client, RequestPipeline
from odradek.server.ports import Ports
from odradek.storage.log_config import LogConfig

ME = BrokerInfo(1, "localhost", 9092, None, (("PLAINTEXT", "localhost", 9092),))


class _Metadata:
    def __init__(self, partitions: int) -> None:
        parts = tuple(PartitionInfo(i, 1, 0, (1,), (1,)) for i in range(partitions))
        self.image = MetadataImage("c", 1, {1: ME}, {"t": TopicInfo("t", uuid.uuid4(), parts)})


class _Replicas:
    partitions: dict[tuple[str, int], Any] = {}


def _pipeline(partitions: int) -> RequestPipeline:
    async def no() -> bool:
        return False

    ports = Ports(node_id=1, config=BrokerConfig.load(environ={}, overrides={}),
                  metadata=_Metadata(partitions),  # type: ignore[arg-type]
                  replicas=_Replicas(),  # type: ignore[arg-type]
                  logs=None, groups=None, transactions=None,  # type: ignore[arg-type]
                  metrics=BrokerMetrics(), topic_config=lambda _t: LogConfig(),
                  ensure_offsets_topic=no, acls=None, spawn=asyncio.ensure_future)
    return RequestPipeline(ports, ports.metrics)


def _call(pipeline: RequestPipeline, api_key: int, version: int, **fields: Any) -> Any:
    frame = bytearray(encode_request(api_key, version, 1, "bench",
                                     request_class(api_key, version)(**fields))[4:])
    reply = pipeline.process(frame, Client("127.0.0.1", 1, "PLAINTEXT"))
    assert isinstance(reply, bytes | bytearray)
    return decode_response(api_key, version, reply, 9)


def main() -> None:
    dtp = sys.modules[request_class(75, 0).__module__]
    md = sys.modules[request_class(3, 12).__module__]
    print(f"{'partitions':>10} {'pages':>6} {'ms/page':>9} {'ms topic':>9} {'ms Metadata':>12}")
    warm = _pipeline(1)  # kio builds its readers and writers on first use
    _call(warm, 75, 0, topics=(dtp.TopicRequest(name="t"),), response_partition_limit=1,
          cursor=None)
    _call(warm, 3, 12, topics=None, allow_auto_topic_creation=False,
          include_topic_authorized_operations=False)
    for n in (1, 1_000, 10_000):
        pipeline = _pipeline(n)
        start, pages, cursor = time.perf_counter(), 0, None
        while True:
            r = _call(pipeline, 75, 0, topics=(dtp.TopicRequest(name="t"),),
                      response_partition_limit=2000, cursor=cursor)
            pages += 1
            if r.next_cursor is None:
                break
            cursor = dtp.Cursor(topic_name=r.next_cursor.topic_name,
                                partition_index=r.next_cursor.partition_index)
        total = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        _call(pipeline, 3, 12, topics=(md.MetadataRequestTopic(topic_id=None, name="t"),),
              allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        metadata_ms = (time.perf_counter() - start) * 1000
        print(f"{n:>10} {pages:>6} {total / pages:>9.2f} {total:>9.2f} {metadata_ms:>12.2f}")


if __name__ == "__main__":
    main()
