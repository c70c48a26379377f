"""In-process replicas for replication tests: on one event loop, N brokers each with real
logs (LogManager), a real ReplicaManager, real fetchers and real Kafka listeners
(KafkaConnection and the handlers). Only the metadata is played by the test: a
MetadataImage built by hand, an `alter_isr` that applies a conditional ISR write to it
as ZooKeeper would, and elections the test calls for.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from odradek.cluster.metadata import BrokerInfo, MetadataImage, PartitionInfo, TopicInfo
from odradek.protocol.messages import request_class
from odradek.replication.channel import BrokerChannel
from odradek.replication.replica_manager import Partition, ReplicaManager
from odradek.replication.settings import ReplicaSettings
from odradek.server.config import BrokerConfig
from odradek.server.connection import KafkaConnection
from odradek.server.connection_limits import ConnectionLimits
from odradek.server.listener_security import listener_security, no_scram
from odradek.server.memory_pool import MemoryPool
from odradek.server.metrics import BrokerMetrics
from odradek.server.pipeline import RequestPipeline
from odradek.server.ports import Ports
from odradek.storage.descriptors import DescriptorReserve
from odradek.storage.log_config import LogConfig
from odradek.storage.manager import LogManager
from tests.cluster.inproc import until

__all__ = ["FAST", "Cluster", "Node", "produce", "segment_bytes", "until"]

PLAINTEXT = listener_security({}, "PLAINTEXT", "PLAINTEXT", no_scram)
FAST = ReplicaSettings(lag_time_max_ms=1500, fetch_wait_max_ms=200, fetch_backoff_ms=100,
                       socket_timeout_ms=5000, hw_checkpoint_interval_ms=200)


class _Image:
    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    @property
    def image(self) -> MetadataImage:
        return self._cluster.image


class Node:
    """One broker: logs, replica manager, a listener and the request pipeline with the
    ports replication uses. Its connections take the broker's path: admitted by
    connection limits of a default config, counted, memory from the pool."""

    def __init__(self, cluster: Cluster, node_id: int, data: Path) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.data = data
        self.metrics = BrokerMetrics()
        self.connections: set[KafkaConnection] = set()
        self.max_request_size = 100 << 20
        self.max_queued_requests = 500
        self.memory_pool = MemoryPool(100 << 20)
        self.config = BrokerConfig.load(environ={})
        self.connection_limits = ConnectionLimits.from_config(
            self.config.__getitem__, self.config.security_props, [PLAINTEXT.name])
        self.controller = _Image(cluster)
        self._tasks: set[asyncio.Future[Any]] = set()
        self.server: asyncio.Server | None = None
        self.port = 0
        self.alive = False

    def track(self, task: asyncio.Future[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def start(self) -> Node:
        self.logs = LogManager([self.data], node_id=self.node_id, cluster_id="test",
                               config=lambda _t: self.cluster.log_config)
        self.logs.startup()
        self.descriptor_reserve = DescriptorReserve()
        self.replicas = ReplicaManager(self.logs, self.node_id)
        self.replicas.settings = self.cluster.settings
        self.replicas.alter_isr = self.cluster.alter_isr_for(self.node_id)
        self.pipeline = RequestPipeline(self._ports(), self.metrics)
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: KafkaConnection(self, PLAINTEXT),  # type: ignore[arg-type]
                                               "127.0.0.1", self.port, reuse_address=True)
        self.port = self.server.sockets[0].getsockname()[1]
        self.alive = True
        for topic in self.cluster.image.topics.values():
            self.open(topic)
        self.replicas.apply_leadership(self.cluster.image)
        return self

    def _ports(self) -> Ports:
        """Handlers get the real logs and replicas; what replication does not need is
        absent (no coordinators)."""
        async def no_offsets_topic() -> bool:
            return False

        return Ports(
            node_id=self.node_id, config=self.config,
            metadata=self.controller,  # type: ignore[arg-type]
            replicas=self.replicas, logs=self.logs,
            groups=None, transactions=None,  # type: ignore[arg-type]
            metrics=self.metrics, topic_config=lambda _t: self.cluster.log_config,
            ensure_offsets_topic=no_offsets_topic, acls=None,
            spawn=lambda work: self.track(asyncio.ensure_future(work)))

    def open(self, topic: TopicInfo) -> None:
        for p in topic.partitions:
            if self.node_id not in p.replicas or (topic.name, p.partition) in \
                    self.replicas.partitions:
                continue
            lg = self.logs.get(topic.name, p.partition) or self.logs.create(
                topic.name, p.partition, self.cluster.log_config)
            lg.high_watermark = lg.log_end_offset  # as the broker opens partitions
            self.replicas.add(Partition(topic.name, p.partition, topic.topic_id, lg,
                                        p.leader_epoch))

    async def stop(self, clean: bool = True) -> None:
        """Stop serving; `clean=False` skips the checkpoints a clean shutdown writes."""
        self.alive = False
        assert self.server is not None
        self.server.close()
        for conn in list(self.connections):
            conn.close()
        for task in list(self._tasks):
            task.cancel()
        await self.replicas.shutdown()
        self.descriptor_reserve.close()
        if clean:
            self.logs.shutdown()
        else:
            for lg in self.logs.all_logs():
                lg.close_without_flush()

    def partition(self, topic: str, index: int = 0) -> Partition:
        return self.replicas.partitions[(topic, index)]


class Cluster:
    def __init__(self, root: Path, n: int, settings: ReplicaSettings = FAST,
                 log_config: LogConfig | None = None) -> None:
        self.root = root
        self.settings = settings
        self.log_config = log_config or LogConfig()
        self.nodes = {i: Node(self, i, root / f"broker-{i}") for i in range(1, n + 1)}
        self.image = MetadataImage("test", 1, {}, {})
        self.isr_writes: list[tuple[str, int, tuple[int, ...]]] = []
        self.loop_errors: list[str] = []

    async def start(self) -> Cluster:
        # a callback that raises (a connection that cannot be made, say) only logs; here
        # it fails the test at `stop`, as it would break a real broker's clients
        asyncio.get_running_loop().set_exception_handler(
            lambda _loop, context: self.loop_errors.append(
                f"{context.get('message')}: {context.get('exception')!r}"))
        for node in self.nodes.values():
            await node.start()
        self._publish_brokers()
        return self

    def _publish_brokers(self) -> None:
        brokers = {i: BrokerInfo(i, "127.0.0.1", n.port, None,
                                 (("PLAINTEXT", "127.0.0.1", n.port),))
                   for i, n in self.nodes.items() if n.alive}
        self.publish(replace(self.image, brokers=brokers))

    def publish(self, image: MetadataImage) -> None:
        self.image = image
        for node in self.nodes.values():
            if node.alive:
                for topic in image.topics.values():
                    node.open(topic)
                node.replicas.apply_leadership(image)

    def create_topic(self, name: str, replicas: tuple[int, ...], partitions: int = 1,
                     configs: dict[str, str] | None = None) -> None:
        parts = tuple(PartitionInfo(i, replicas[0], 0, replicas, replicas)
                      for i in range(partitions))
        topic = TopicInfo(name, uuid.uuid4(), parts, dict(configs or {}))
        self.publish(replace(self.image, topics={**self.image.topics, name: topic}))

    def state(self, topic: str, index: int = 0) -> PartitionInfo:
        return self.image.topics[topic].partitions[index]

    def set_state(self, topic: str, index: int, **changes: Any) -> PartitionInfo:
        info = self.image.topics[topic]
        new = replace(info.partitions[index], **changes)
        parts = tuple(new if p.partition == index else p for p in info.partitions)
        topics = {**self.image.topics, topic: replace(info, partitions=parts)}
        self.publish(replace(self.image, topics=topics))
        return new

    def elect(self, topic: str, leader: int, isr: tuple[int, ...] | None = None,
              index: int = 0) -> PartitionInfo:
        """What the controller does: a new leader at the next epoch."""
        cur = self.state(topic, index)
        return self.set_state(topic, index, leader=leader, leader_epoch=cur.leader_epoch + 1,
                              isr=isr or cur.isr, partition_epoch=cur.partition_epoch + 1)

    def alter_isr_for(self, node_id: int) -> Callable[..., Any]:
        async def alter(topic: str, index: int, leader_epoch: int, partition_epoch: int,
                        new_isr: tuple[int, ...]) -> PartitionInfo | None:
            await asyncio.sleep(0.001)  # a ZooKeeper round trip
            cur = self.state(topic, index)
            if (cur.leader != node_id or cur.leader_epoch != leader_epoch
                    or cur.partition_epoch != partition_epoch):
                return None
            self.isr_writes.append((topic, index, new_isr))
            return self.set_state(topic, index, isr=tuple(new_isr),
                                  partition_epoch=partition_epoch + 1)
        return alter

    async def kill(self, node_id: int, clean: bool = False) -> None:
        await self.nodes[node_id].stop(clean)
        self._publish_brokers()

    async def restart(self, node_id: int) -> Node:
        old = self.nodes[node_id]
        node = self.nodes[node_id] = Node(self, node_id, old.data)
        node.port = old.port
        await node.start()
        self._publish_brokers()
        return node

    async def stop(self) -> None:
        for node in self.nodes.values():
            if node.alive:
                await node.stop()
        assert not self.loop_errors, f"the event loop saw errors: {self.loop_errors}"


async def produce(node: Node, topic: str, records: bytes, acks: int = -1, index: int = 0,
                  timeout_ms: int = 5000) -> tuple[int, int]:
    """(error code, base offset) of one Produce v9 to `node`, over the wire."""
    module = sys.modules[request_class(0, 9).__module__]
    body = module.ProduceRequest(
        transactional_id=None, acks=acks, timeout=_ms(timeout_ms),
        topic_data=(module.TopicProduceData(name=topic, partition_data=(
            module.PartitionProduceData(index=index, records=records),)),))
    channel = BrokerChannel("127.0.0.1", node.port, "test", 30)
    try:
        response = await channel.call(0, 9, body)
    finally:
        channel.close()
    p = response.responses[0].partition_responses[0]
    return int(p.error_code), int(p.base_offset)


def _ms(value: int) -> Any:
    import datetime

    return datetime.timedelta(milliseconds=value)


def segment_bytes(node: Node, topic: str, index: int = 0) -> bytes:
    """The partition's .log files, concatenated: replicas must be byte-identical."""
    lg = node.partition(topic, index).log
    lg.flush()
    return b"".join(p.read_bytes() for p in sorted(lg.directory.glob("*.log")))
