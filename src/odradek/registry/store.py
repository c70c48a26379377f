"""The `_schemas` topic as the registry's log: a reader thread replays it into the state,
a producer appends to it, and a write returns only once this instance has read it back.

Kafka I/O goes through confluent-kafka (librdkafka), as every other client in odradek;
the state is changed only on the event loop's thread (records are handed over with
call_soon_threadsafe), so request handlers read it without locks.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as TP
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.registry import records
from odradek.registry.errors import OperationTimeout, StoreError
from odradek.registry.state import RegistryState

log = logging.getLogger(__name__)
Record = tuple[bytes, bytes | None]
_NOT_YET = (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART,
            KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION)


class KafkaStore:
    def __init__(self, bootstrap: str, topic: str = "_schemas", replication_factor: int = 3,
                 client_config: dict[str, Any] | None = None, timeout: float = 30.0,
                 wait_for_replicas: bool = False, state: Any = None,
                 decode: Callable[[bytes, bytes | None], tuple[Any, Any]] = records.decode
                 ) -> None:
        self.bootstrap = bootstrap
        self.wait_for_replicas = wait_for_replicas
        self.topic = topic
        self.replication_factor = replication_factor
        self.timeout = timeout
        self._client_config = {"bootstrap.servers": bootstrap, **(client_config or {})}
        # the `_schemas` state by default; the ACL topic's (acls.AclState) shares the rest
        self.state: Any = RegistryState() if state is None else state
        self._decode = decode
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: Consumer | None = None
        # librdkafka holds a watermark query while the same consumer is in consume()
        self._offsets: Consumer | None = None
        self._producer: Producer | None = None
        self.listeners: list[Callable[[], None]] = []

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._ensure_topic)
        # a write waits for its record to come back through this consumer: no queue
        # backoff (librdkafka's default pauses fetching up to 1 s) keeps that in ms
        self._consumer = Consumer({**self._client_config, "group.id": "odradek-registry-reader",
                                   "enable.auto.commit": False,
                                   "enable.partition.eof": False,
                                   "fetch.queue.backoff.ms": 0,
                                   "fetch.error.backoff.ms": 50})
        self._consumer.assign([TP(self.topic, 0, OFFSET_BEGINNING)])
        self._offsets = Consumer({**self._client_config, "group.id": "odradek-registry-reader",
                                  "enable.auto.commit": False})
        self._producer = Producer({**self._client_config, "acks": "all",
                                   "enable.idempotence": True, "linger.ms": 0})
        self._thread = threading.Thread(target=self._read, name="registry-reader", daemon=True)
        self._thread.start()
        await self.sync()

    async def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 10)
        for consumer in (self._consumer, self._offsets):
            if consumer is not None:
                await asyncio.to_thread(consumer.close)
        if self._producer is not None:
            await asyncio.to_thread(self._producer.flush, 5)
        for _, fut in self._waiters:
            if not fut.done():
                fut.cancel()

    def _ensure_topic(self) -> None:
        admin = AdminClient(self._client_config)
        deadline = time.monotonic() + self.timeout
        meta = admin.list_topics(timeout=self.timeout)
        # hosted in a cluster's broker, which may start before the others: wait for them
        # (up to the timeout), or the topic would be made with fewer replicas for good
        while self.wait_for_replicas and len(meta.brokers) < self.replication_factor \
                and not _exists(meta, self.topic) and time.monotonic() < deadline \
                and not self._stop.is_set():
            self._stop.wait(0.2)
            meta = admin.list_topics(timeout=self.timeout)
        if not _exists(meta, self.topic):
            self._create(admin, len(meta.brokers))
        # librdkafka keeps what it first learns of a partition for a while: let the
        # clients made next see the topic with its leader (a new topic takes a moment
        # to reach every broker of a cluster)
        while time.monotonic() < deadline and not self._stop.is_set():
            topic = admin.list_topics(self.topic, timeout=self.timeout).topics.get(self.topic)
            partition = None if topic is None or topic.error else topic.partitions.get(0)
            if partition is not None and partition.error is None and partition.leader >= 0:
                return
            self._stop.wait(0.1)

    def _create(self, admin: AdminClient, brokers: int) -> None:
        rf = max(1, min(self.replication_factor, brokers))
        if rf < self.replication_factor:
            log.warning("creating %s with replication factor %d: only %d brokers, fewer "
                        "than its %d", self.topic, rf, brokers, self.replication_factor)
        futures = admin.create_topics([NewTopic(self.topic, 1, rf, config={
            "cleanup.policy": "compact"})], operation_timeout=self.timeout)
        try:
            futures[self.topic].result(self.timeout)
            log.info("created %s (1 partition, replication factor %d)", self.topic, rf)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise

    def _read(self) -> None:
        assert self._consumer is not None and self._loop is not None
        while not self._stop.is_set():
            try:
                # consume(n, t) waits out t unless n arrive: take the first record as soon
                # as it comes, then whatever else is already here
                first = self._consumer.poll(0.2)
                msgs = [] if first is None else [first, *self._consumer.consume(999, 0)]
            except KafkaException as e:  # pragma: no cover - librdkafka retries by itself
                log.warning("reading %s: %s", self.topic, e)
                continue
            batch: list[tuple[bytes, bytes | None, int]] = [
                (bytes(m.key() or b""), m.value(), int(m.offset() or 0)) for m in msgs
                if m.error() is None and m.key() is not None]
            for m in msgs:
                err = m.error()
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    log.warning("reading %s: %s", self.topic, err)
            if batch and not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self._apply, batch)

    def _apply(self, batch: Sequence[tuple[bytes, bytes | None, int]]) -> None:
        for key, value, offset in batch:
            try:
                k, v = self._decode(key, value)
                self.state.apply(k, v, offset)
            except (ValueError, KeyError, TypeError) as e:
                # another writer's record we do not understand must not stop the replay
                log.warning("skipping %s offset %d: %s", self.topic, offset, e)
                self.state.offset = max(self.state.offset, offset)
        still = []
        for target, fut in self._waiters:
            if self.state.offset >= target:
                if not fut.done():
                    fut.set_result(None)
            else:
                still.append((target, fut))
        self._waiters = still
        for listener in self.listeners:
            listener()

    async def wait_for(self, offset: int) -> None:
        if offset < 0 or self.state.offset >= offset:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, fut))
        try:
            await asyncio.wait_for(fut, self.timeout)
        except TimeoutError as e:
            raise OperationTimeout(f"Timed out waiting for the store to reach offset {offset}"
                                   ) from e

    async def sync(self) -> None:
        """Read everything written to the topic so far (by any instance)."""
        assert self._offsets is not None
        tp = TP(self.topic, 0)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                _, high = await asyncio.to_thread(self._offsets.get_watermark_offsets, tp,
                                                  self.timeout)
                break
            except KafkaException as e:
                # a topic just made in a cluster: its metadata or leader is not out yet
                if e.args[0].code() not in _NOT_YET or time.monotonic() > deadline:
                    raise StoreError(f"Error while reading {self.topic}: {e}") from e
                await asyncio.sleep(0.1)
        await self.wait_for(high - 1)

    async def write(self, batch: Sequence[Record]) -> int:
        """Append records and wait until this instance has applied them; the last offset."""
        offset = await asyncio.to_thread(self._produce, batch)
        await self.wait_for(offset)
        return offset

    def _produce(self, batch: Sequence[Record]) -> int:
        assert self._producer is not None
        results: list[Any] = []

        def done(err: KafkaError | None, msg: Any) -> None:
            results.append(err if err is not None else msg.offset())

        for key, value in batch:
            self._producer.produce(self.topic, key=key, value=value, partition=0,
                                   on_delivery=done)
        remaining = self._producer.flush(self.timeout)
        errors = [r for r in results if isinstance(r, KafkaError)]
        if remaining or errors or len(results) != len(batch):
            raise StoreError(f"Error while writing to {self.topic}: "
                             f"{errors[0] if errors else 'timed out'}")
        return max(int(r) for r in results)


def _exists(meta: Any, topic: str) -> bool:
    return topic in meta.topics and not meta.topics[topic].error
