"""Handlers driven through the request pipeline with small fakes of their ports: no
broker, no sockets — the shape every handler has now that none of them sees the Broker."""

from __future__ import annotations

import asyncio
import datetime
import struct
import sys
import uuid
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from odradek.cluster.metadata import BrokerInfo, MetadataImage, PartitionInfo, TopicInfo
from odradek.protocol.errors import ErrorCode, TopicAlreadyExists
from odradek.protocol.messages import (
    decode_response,
    encode_request,
    request_class,
    response_class,
)
from odradek.server.config import BrokerConfig
from odradek.server.metrics import BrokerMetrics
from odradek.server.pipeline import Client, RequestPipeline
from odradek.server.ports import Ports
from odradek.storage.log_config import LogConfig

ME = BrokerInfo(1, "localhost", 9092, None, (("PLAINTEXT", "localhost", 9092),))


class FakeMetadata:
    """The metadata port: an image and the admin calls a test wants to see."""

    def __init__(self) -> None:
        self.image = MetadataImage("cluster", 1, {1: ME}, {})
        self.created: list[tuple[str, int]] = []
        self.settled: list[Sequence[str]] = []

    def validate_topic_configs(self, configs: Mapping[str, str | None]) -> dict[str, str]:
        return {k: v for k, v in configs.items() if v is not None}

    async def create_topic(self, name: str, num_partitions: int = -1, *_: Any,
                           **__: Any) -> TopicInfo:
        if name in self.image.topics:
            raise TopicAlreadyExists(f"Topic '{name}' already exists.")
        if name == "boom":
            raise RuntimeError("a bug in the controller")
        n = max(num_partitions, 1)
        topic = TopicInfo(name, uuid.uuid4(),
                          tuple(PartitionInfo(i, 1, 0, (1,), (1,)) for i in range(n)), {})
        self.image = MetadataImage("cluster", 1, {1: ME}, {**self.image.topics, name: topic})
        self.created.append((name, n))
        return topic

    async def settle(self, created: Sequence[str] = (), deleted: Sequence[str] = (),
                     timeout_s: float = 30.0) -> bool:
        self.settled.append(created)
        return True


class NoReplicas:
    """A broker that hosts no partition yet."""

    partitions: dict[tuple[str, int], Any] = {}


def _pipeline(metadata: FakeMetadata, **config: str) -> RequestPipeline:
    async def no_offsets_topic() -> bool:
        return False

    ports = Ports(node_id=1, config=BrokerConfig.load(environ={}, overrides=config),
                  metadata=metadata,  # type: ignore[arg-type]
                  replicas=NoReplicas(),  # type: ignore[arg-type]
                  logs=SimpleNamespace(unopened={}, offline_dirs={}),  # type: ignore[arg-type]
                  groups=None, transactions=None,  # type: ignore[arg-type]
                  metrics=BrokerMetrics(),
                  topic_config=lambda _t: LogConfig(),
                  ensure_offsets_topic=no_offsets_topic, acls=None, spawn=asyncio.ensure_future)
    return RequestPipeline(ports, ports.metrics)


def _call(pipeline: RequestPipeline, api_key: int, version: int, **fields: Any) -> Any:
    frame = bytearray(encode_request(api_key, version, 42, "unit",
                                     request_class(api_key, version)(**fields))[4:])

    async def run() -> Any:
        reply = pipeline.process(frame, Client("127.0.0.1", 5000, "PLAINTEXT"))
        if asyncio.iscoroutine(reply):
            reply = await reply
        return reply

    reply = asyncio.run(run())
    assert isinstance(reply, bytes | bytearray), reply
    assert struct.unpack_from(">i", reply, 4)[0] == 42
    offset = 9 if response_class(api_key, version).__header_schema__.__flexible__ else 8
    return decode_response(api_key, version, reply, offset)


def test_create_topics_answers_per_topic_and_waits_for_the_cluster_to_settle() -> None:
    metadata = FakeMetadata()
    schema = sys.modules[request_class(19, 7).__module__]
    topic = schema.CreatableTopic
    response = _call(_pipeline(metadata), 19, 7, timeout=datetime.timedelta(seconds=5),
                     validate_only=False, topics=(
                         topic(name="a", num_partitions=3, replication_factor=1,
                               assignments=(), configs=()),
                         topic(name="a", num_partitions=1, replication_factor=1,
                               assignments=(), configs=())))
    codes = [(t.name, t.error_code) for t in response.topics]
    assert codes == [("a", ErrorCode.none), ("a", ErrorCode.invalid_request)]
    assert metadata.created == [("a", 3)]
    assert metadata.settled == [["a"]]


def test_metadata_auto_creates_only_when_enabled() -> None:
    schema = sys.modules[request_class(3, 12).__module__]
    wanted = (schema.MetadataRequestTopic(topic_id=None, name="new"),)
    off = FakeMetadata()
    r = _call(_pipeline(off), 3, 12, topics=wanted, allow_auto_topic_creation=True,
              include_topic_authorized_operations=False)
    assert r.topics[0].error_code == ErrorCode.unknown_topic_or_partition and not off.created
    on = FakeMetadata()
    r = _call(_pipeline(on, **{"auto.create.topics.enable": "true"}), 3, 12, topics=wanted,
              allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    assert on.created == [("new", 1)] and r.topics[0].error_code == ErrorCode.none


def test_a_handler_that_raises_answers_unknown_server_error_per_topic() -> None:
    metadata = FakeMetadata()
    schema = sys.modules[request_class(19, 7).__module__]
    r = _call(_pipeline(metadata), 19, 7, timeout=datetime.timedelta(seconds=5),
              validate_only=False, topics=(schema.CreatableTopic(
                  name="boom", num_partitions=1, replication_factor=1, assignments=(),
                  configs=()),))
    assert [(t.name, t.error_code) for t in r.topics] == [
        ("boom", ErrorCode.unknown_server_error)]


def test_find_coordinator_waits_for_the_offsets_topic() -> None:
    r = _call(_pipeline(FakeMetadata()), 10, 4, key_type=0, coordinator_keys=("g",))
    assert r.coordinators[0].error_code == ErrorCode.coordinator_not_available
