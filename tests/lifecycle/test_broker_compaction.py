"""Compaction against a real broker: the table a consumer rebuilds, tombstones, keys."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from tests.clients.test_confluent_kafka import create_topic
from tests.conftest import BrokerProcess
from tests.lifecycle.test_broker_retention import (  # noqa: F401
    broker,
    segment_bytes,
    wait_for,
)

KV = tuple[bytes, bytes | None]


def read_from_start(bootstrap: str, topic: str, idle_s: float = 1.5) -> list[KV]:
    """Everything a new consumer reads from the beginning, tombstones included."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.time()}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 50,
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    out: list[KV] = []
    deadline = time.monotonic() + 20
    last = -1
    while last < high - 1 and time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is None or msg.error() is not None:
            continue
        out.append((msg.key(), msg.value()))
        last = msg.offset()
    c.close()
    return out


class CheckedProducer:
    """A producer whose small batches fit tiny test segments, and which fails the test
    on any delivery error."""

    def __init__(self, bootstrap: str, **conf: object) -> None:
        self.errors: list[KafkaError] = []
        self.p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2,
                           "batch.size": 1000, **conf})

    def produce(self, topic: str, **kwargs: object) -> None:
        self.p.produce(topic, on_delivery=self._done, **kwargs)  # type: ignore[arg-type]
        self.p.poll(0)

    def _done(self, err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            self.errors.append(err)

    def flush(self, timeout: float = 15) -> int:
        left = self.p.flush(timeout)
        assert not self.errors, self.errors
        return int(left)


def table(records: list[KV]) -> dict[bytes, bytes]:
    t: dict[bytes, bytes] = {}
    for k, v in records:
        if v is None:
            t.pop(k, None)
        else:
            t[k] = v
    return t


def log_bytes(broker: BrokerProcess, topic: str) -> int:  # noqa: F811
    return segment_bytes(broker.data_dir / f"{topic}-0")


def test_a_compacted_topic_rebuilds_the_same_table_from_the_start(
    broker: BrokerProcess, topic_name: str  # noqa: F811
) -> None:
    create_topic(broker.bootstrap, topic_name, **{
        "cleanup.policy": "compact", "segment.bytes": "3000",
        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "2000",
    })
    p = CheckedProducer(broker.bootstrap)
    written: list[KV] = []
    for round_ in range(15):
        for k in range(20):
            key = b"key-%02d" % k
            value = None if (k % 7 == 0 and round_ == 14) else b"r%02d-%s" % (round_, key)
            p.produce(topic_name, key=key, value=value)
            written.append((key, value))
    assert p.flush(15) == 0
    along = table(written)  # what a consumer that read it all along holds
    big = log_bytes(broker, topic_name)
    # Filler on other keys rolls the segments holding the last round and the tombstones.
    for i in range(60):
        p.produce(topic_name, key=b"filler-%02d" % (i % 3), value=b"f" * 40)
    assert p.flush(15) == 0
    along.update({b"filler-%02d" % (i % 3): b"f" * 40 for i in range(60)})
    wait_for(lambda: log_bytes(broker, topic_name) < big / 2, what="compaction", timeout=30)
    # Read from the start: the same table, each key once (its last value) before the
    # active segment; tombstones still readable until delete.retention.ms has passed.
    from_start = read_from_start(broker.bootstrap, topic_name)
    assert table(from_start) == along
    deleted = {b"key-%02d" % k for k in range(0, 20, 7)}
    assert {k for k, v in from_start if v is None} == deleted

    def tombstones_gone() -> bool:
        return not [k for k, v in read_from_start(broker.bootstrap, topic_name) if v is None]

    wait_for(tombstones_gone, what="tombstones to vanish", timeout=30)
    assert table(read_from_start(broker.bootstrap, topic_name)) == along


def test_a_record_without_a_key_is_refused_by_a_compacted_topic(
    broker: BrokerProcess, topic_name: str  # noqa: F811
) -> None:
    create_topic(broker.bootstrap, topic_name, **{"cleanup.policy": "compact"})
    errors: list[KafkaError] = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.send.max.retries": 0})
    p.produce(topic_name, key=b"k", value=b"fine")
    p.flush(10)
    p.produce(topic_name, value=b"no key",
              on_delivery=lambda err, _msg: errors.append(err) if err else None)
    p.flush(10)
    assert len(errors) == 1
    assert errors[0].code() == KafkaError.INVALID_RECORD
    assert [v for _k, v in read_from_start(broker.bootstrap, topic_name)] == [b"fine"]


def test_compact_and_delete_both_apply(broker: BrokerProcess,  # noqa: F811
                                       topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, **{
        "cleanup.policy": "compact,delete", "segment.bytes": "2000",
        "retention.ms": "1800000", "min.cleanable.dirty.ratio": "0.01",
    })
    from tests.lifecycle.test_broker_retention import earliest

    hour_ago = int(time.time() * 1000) - 3_600_000
    p = CheckedProducer(broker.bootstrap)
    for i in range(50):
        p.produce(topic_name, key=b"old-%d" % i, value=b"v", timestamp=hour_ago)
    assert p.flush(15) == 0
    # Retention applies to a compacted topic too: everything older than 30 minutes
    # goes, the active segment included (rolled first), and the offsets carry on.
    wait_for(lambda: earliest(broker.bootstrap, topic_name) == 50, what="retention")
    for i in range(200):
        p.produce(topic_name, key=b"k%d" % (i % 4), value=b"v%03d" % i)
    assert p.flush(15) == 0

    def compacted() -> bool:
        return 0 < len(read_from_start(broker.bootstrap, topic_name)) < 100

    wait_for(compacted, what="compaction", timeout=30)
    records = read_from_start(broker.bootstrap, topic_name)
    assert not [k for k, _ in records if k.startswith(b"old-")]
    assert table(records) == {b"k%d" % k: b"v%03d" % (196 + k) for k in range(4)}


def test_cleaner_offset_checkpoint_is_written(broker: BrokerProcess,  # noqa: F811
                                             topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, **{
        "cleanup.policy": "compact", "segment.bytes": "1500",
        "min.cleanable.dirty.ratio": "0.01",
    })
    p = CheckedProducer(broker.bootstrap)
    for i in range(200):
        p.produce(topic_name, key=b"k%d" % (i % 3), value=b"v" * 30)
    assert p.flush(15) == 0
    checkpoint = Path(broker.data_dir) / "cleaner-offset-checkpoint"
    wait_for(lambda: checkpoint.exists() and f"{topic_name} 0 " in checkpoint.read_text(),
             what="cleaner-offset-checkpoint", timeout=30)


def test_consumer_offsets_is_compacted_and_keeps_the_last_commit(tmp_path: Path,
                                                                 topic_name: str) -> None:
    from tests.lifecycle.test_broker_retention import FAST

    b = BrokerProcess(tmp_path / "data", overrides={
        **FAST, "offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "4000",
        "log.cleaner.min.cleanable.ratio": "0.01",
    }).start()
    try:
        create_topic(b.bootstrap, topic_name)
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "committer",
                      "enable.auto.commit": False})
        offsets_dir = b.data_dir / "__consumer_offsets-0"
        c.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
        # what 300 commits write, from the first one's size: measured after the loop,
        # a slow machine's cleaner may already have compacted some of them
        written = 300 * segment_bytes(offsets_dir)
        for offset in range(2, 301):
            c.commit(offsets=[TopicPartition(topic_name, 0, offset)], asynchronous=False)

        def compacted() -> bool:
            size = segment_bytes(offsets_dir)
            return size < written / 3

        wait_for(compacted, what="__consumer_offsets compaction", timeout=30)
        c.close()
    finally:
        b.stop()
    b.start()  # the groups load from the compacted log
    try:
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "committer"})
        (tp,) = c.committed([TopicPartition(topic_name, 0)], timeout=10)
        assert tp.offset == 300
        c.close()
    finally:
        b.stop()
