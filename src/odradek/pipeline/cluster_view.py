"""What the driver asks the brokers: partitions, offsets, offsets by time; and group commits.

All through confluent-kafka's AdminClient; group commits from a background thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from odradek.pipeline.offsets import Offsets, TopicPartitionKey
from odradek.pipeline.options import SourceOptions, Subscription

log = logging.getLogger(__name__)

_EARLIEST: OffsetSpec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
_LATEST: OffsetSpec = OffsetSpec.latest()  # type: ignore[no-untyped-call]


class BrokerUnavailableError(ConnectionError):
    pass


class TopicNotFoundError(LookupError):
    pass


def _admin_config(options: SourceOptions) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": options.bootstrap_servers,
                            # librdkafka's connection errors go to logging, not raw stderr.
                            "logger": logging.getLogger("odradek.pipeline.librdkafka")}
    # Security and client settings (sasl.*, ssl.*, client.id …) apply to admin calls too;
    # consumer-only keys would make librdkafka refuse the admin client.
    for key, value in options.kafka_params.items():
        if key.split(".")[0] in ("security", "sasl", "ssl", "client", "socket", "broker"):
            conf[key] = value
    return conf


class GroupCommitter:
    """Commits offsets for a group from a background thread, newest offsets first.

    Uses the admin API (OffsetCommit as an empty group's simple commit), whose calls have a
    deadline: a consumer's commit against a broker without a group coordinator would hold
    its close() for most of a minute.
    """

    def __init__(self, conf: dict[str, Any], group: str) -> None:
        self.group = group
        self._admin = AdminClient(conf)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._pending: Offsets = {}
        self._committed: Offsets = {}
        self._closing = False
        self._warned = False
        self.failures = 0
        self._thread = threading.Thread(target=self._run, name=f"commit-{group}", daemon=True)
        self._thread.start()

    def submit(self, offsets: Mapping[TopicPartitionKey, int]) -> None:
        with self._lock:
            for tp, o in offsets.items():
                if self._committed.get(tp) != o:
                    self._pending[tp] = o
        self._wake.set()

    def close(self, grace_s: float = 2.0) -> None:
        """Give the last commit a moment; not at all when no commit ever got through."""
        self._closing = True
        self._wake.set()
        self._thread.join(0 if self.failures and not self._committed else grace_s)

    def _commit_once(self, offsets: Offsets) -> None:
        request = ConsumerGroupTopicPartitions(
            self.group, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])
        futures = self._admin.alter_consumer_group_offsets([request], request_timeout=10)
        for future in futures.values():
            result = future.result()
            for tp in result.topic_partitions:
                if tp.error is not None:
                    raise KafkaException(tp.error)

    def _run(self) -> None:
        backoff = 0.5
        while True:
            self._wake.wait()
            with self._lock:
                todo, self._pending = self._pending, {}
                self._wake.clear()
            if todo:
                try:
                    self._commit_once(todo)
                    with self._lock:
                        self._committed.update(todo)
                    backoff = 0.5
                except KafkaException as e:
                    self.failures += 1
                    with self._lock:
                        for tp, o in todo.items():
                            self._pending.setdefault(tp, o)
                    err = e.args[0] if e.args else e
                    text = err.str() if isinstance(err, KafkaError) else str(err)
                    (log.debug if self._warned else log.warning)(
                        "could not commit offsets to group %s (lag tools will not see the "
                        "pipeline's progress until it works): %s", self.group, text)
                    self._warned = True
                    if not self._closing:
                        time.sleep(backoff)
                        backoff = min(backoff * 2, 30.0)
                        self._wake.set()
            if self._closing:
                return


class ClusterView:
    """Partitions and offsets of the subscribed topics, as the brokers see them now."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._admin = AdminClient(_admin_config(options))
        self._committer: GroupCommitter | None = None

    def close(self) -> None:
        if self._committer is not None:
            self._committer.close()
            self._committer = None

    def partitions(self) -> list[TopicPartitionKey]:
        """The subscription's partitions; a named topic that does not exist is an error."""
        try:
            metadata = self._admin.list_topics(timeout=self.options.api_timeout_s)
        except KafkaException as e:
            raise BrokerUnavailableError(
                f"cannot reach the brokers at {self.options.bootstrap_servers}: "
                f"{e.args[0].str() if e.args else e}") from None
        opts = self.options
        if opts.subscription is Subscription.ASSIGN:
            wanted = [(t, p) for t, ps in opts.assigned.items() for p in ps]
            missing = [f"{t}-{p}" for t, p in wanted
                       if t not in metadata.topics or p not in metadata.topics[t].partitions]
            if missing:
                raise TopicNotFoundError(
                    f"assigned partitions do not exist: {', '.join(sorted(missing))}")
            return sorted(wanted)
        if opts.subscription is Subscription.SUBSCRIBE:
            missing = [t for t in opts.topics if t not in metadata.topics
                       or metadata.topics[t].error is not None]
            if missing:
                raise TopicNotFoundError(
                    f"topic {', '.join(missing)} does not exist on "
                    f"{opts.bootstrap_servers}; create it first (odradek topics create)")
        return sorted((name, p) for name, topic in metadata.topics.items()
                      if opts.matches(name) and not name.startswith("__")
                      for p in topic.partitions)

    def _list(self, specs: Mapping[TopicPartitionKey, OffsetSpec]) -> dict[TopicPartitionKey, int]:
        if not specs:
            return {}
        isolation = (IsolationLevel.READ_COMMITTED if self.options.read_committed
                     else IsolationLevel.READ_UNCOMMITTED)
        futures = self._admin.list_offsets(
            {TopicPartition(t, p): spec for (t, p), spec in specs.items()},
            isolation_level=isolation, request_timeout=self.options.api_timeout_s)
        result: dict[TopicPartitionKey, int] = {}
        for tp, future in futures.items():
            try:
                result[(tp.topic, tp.partition)] = int(future.result().offset)
            except KafkaException as e:
                err: KafkaError = e.args[0]
                if err.code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT,
                                  KafkaError._ALL_BROKERS_DOWN):
                    raise BrokerUnavailableError(
                        f"cannot reach the brokers at {self.options.bootstrap_servers}: "
                        f"{err.str()}") from None
                raise RuntimeError(
                    f"listing offsets of {tp.topic}-{tp.partition} failed: {err.str()}") from None
        return result

    def earliest(self, tps: Iterable[TopicPartitionKey]) -> Offsets:
        return self._list({tp: _EARLIEST for tp in tps})

    def latest(self, tps: Iterable[TopicPartitionKey]) -> Offsets:
        """Log end offsets; under read_committed the last stable offsets."""
        return self._list({tp: _LATEST for tp in tps})

    def for_times(self, timestamps: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey,
                                                                              int]:
        """First offset whose timestamp is at or after each time; -1 where there is none."""
        return self._list({tp: OffsetSpec.for_timestamp(ts) for tp, ts in timestamps.items()})

    def commit_to_group(self, offsets: Mapping[TopicPartitionKey, int]) -> None:
        """Record the pipeline's progress in its consumer group, for lag tools.

        Spark's checkpoint stays the source of truth, so this never blocks or fails a batch:
        the committer works in the background and a failed commit is carried by the next.
        """
        if not self.options.commit_to_group or not offsets:
            return
        if self._committer is None:
            self._committer = GroupCommitter(_admin_config(self.options), self.options.group_id)
        self._committer.submit(offsets)
