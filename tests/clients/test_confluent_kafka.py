"""confluent-kafka (librdkafka 2.16) against a real broker: produce, consume, admin."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from tests.conftest import BrokerProcess

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def create_topic(bootstrap: str, name: str, partitions: int = 1, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name]
    fut.result(15)


def consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 20.0,
                **extra: object) -> list:
    conf = {"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra}
    c = Consumer(conf)
    md = c.list_topics(topic, timeout=10).topics[topic]
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in md.partitions])
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < expected and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        out.append(msg)
    c.close()
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_each_codec(broker: BrokerProcess, topic_name: str,
                                        codec: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=3)
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                  "linger.ms": 5, "enable.idempotence": True})
    sent = []
    for i in range(300):
        key = f"k{i % 7}".encode()
        value = (f"value-{i}-" + "x" * (i % 50)).encode()
        headers = [("h", f"{i}".encode()), ("empty", b""), ("none", None)]
        p.produce(topic_name, key=key, value=value, headers=headers)
        sent.append((key, value))
    assert p.flush(15) == 0
    got = consume_all(broker.bootstrap, topic_name, len(sent))
    assert sorted((m.key(), m.value()) for m in got) == sorted(sent)
    by_partition: dict[int, list[int]] = {}
    for m in got:
        by_partition.setdefault(m.partition(), []).append(m.offset())
        hs = dict(m.headers())
        assert hs["empty"] == b""
        assert hs["none"] is None
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets))), "offsets must be gapless and in order"


def test_keys_route_to_one_partition_and_null_values(broker: BrokerProcess,
                                                    topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=4)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(20):
        p.produce(topic_name, key=b"same-key", value=None)
    p.produce(topic_name, key=None, value=b"no key")
    assert p.flush(10) == 0
    got = consume_all(broker.bootstrap, topic_name, 21)
    keyed = [m for m in got if m.key() == b"same-key"]
    assert len(keyed) == 20
    assert len({m.partition() for m in keyed}) == 1
    assert all(m.value() is None for m in keyed)
    assert [m.value() for m in got if m.key() is None] == [b"no key"]


def test_large_record_up_to_and_over_max_message_bytes(broker: BrokerProcess,
                                                       topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, **{"max.message.bytes": "200000"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 10_000_000})
    results: list[KafkaError | None] = []
    p.produce(topic_name, value=b"a" * 190_000, on_delivery=lambda e, m: results.append(e))
    p.flush(10)
    p.produce(topic_name, value=b"b" * 300_000, on_delivery=lambda e, m: results.append(e))
    p.flush(10)
    assert results[0] is None
    assert results[1] is not None and results[1].code() == KafkaError.MSG_SIZE_TOO_LARGE
    got = consume_all(broker.bootstrap, topic_name, 1)
    assert len(got[0].value()) == 190_000


def test_list_offsets_in_every_mode(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    base = int(time.time() * 1000) - 10_000
    for i in range(10):
        # timestamps out of order: the max timestamp is at offset 5
        ts = base + (100_000 if i == 5 else i * 10)
        p.produce(topic_name, value=b"v%d" % i, timestamp=ts)
        p.flush(5)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition(topic_name, 0)

    def lookup(spec: OffsetSpec) -> tuple[int, int]:
        res = admin.list_offsets({tp: spec})[tp].result(10)
        return res.offset, res.timestamp

    assert lookup(OffsetSpec.earliest())[0] == 0
    assert lookup(OffsetSpec.latest())[0] == 10
    assert lookup(OffsetSpec.max_timestamp()) == (5, base + 100_000)
    assert lookup(OffsetSpec.for_timestamp(base + 35))[0] == 4
    assert lookup(OffsetSpec.for_timestamp(base + 10_000_000))[0] == -1
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
    assert c.get_watermark_offsets(tp, timeout=10) == (0, 10)
    found = c.offsets_for_times([TopicPartition(topic_name, 0, base + 20)], timeout=10)
    assert found[0].offset == 2
    c.close()


def test_admin_calls(broker: BrokerProcess, topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 2, 1, config={"retention.ms": "3600000"})])[
        topic_name].result(10)
    # creating it again fails with TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaException) as exc:
        admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(10)
    assert exc.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    admin.create_partitions([NewPartitions(topic_name, 5)])[topic_name].result(10)
    md = admin.list_topics(topic_name, timeout=10)
    assert len(md.topics[topic_name].partitions) == 5
    with pytest.raises(KafkaException):
        admin.create_partitions([NewPartitions(topic_name, 3)])[topic_name].result(10)

    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == 1  # DYNAMIC_TOPIC_CONFIG
    assert configs["cleanup.policy"].value == "delete"
    assert configs["retention.bytes"].value == "-1"

    change = ConfigResource(ConfigResource.Type.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("max.message.bytes", "5000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ])
    admin.incremental_alter_configs([change])[change].result(10)
    configs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic_name)])
    after = next(iter(configs.values())).result(10)
    assert after["max.message.bytes"].value == "5000"
    assert after["retention.ms"].value == str(72 * 3600 * 1000)  # our 72 h default

    bad = ConfigResource(ConfigResource.Type.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as exc:
        admin.incremental_alter_configs([bad])[bad].result(10)
    assert exc.value.args[0].code() == KafkaError.INVALID_CONFIG

    cluster = admin.describe_cluster().result(10)
    assert len(cluster.nodes) == 1
    assert cluster.cluster_id

    broker_res = ConfigResource(ConfigResource.Type.BROKER, "1")
    broker_configs = admin.describe_configs([broker_res])[broker_res].result(10)
    assert broker_configs["auto.create.topics.enable"].value == "false"
    assert broker_configs["log.retention.hours"].value == "72"

    admin.delete_topics([topic_name])[topic_name].result(10)
    deadline = time.monotonic() + 5
    while topic_name in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.1)
    assert topic_name not in admin.list_topics(timeout=10).topics


def test_produce_to_missing_topic_fails_without_creating_it(broker: BrokerProcess,
                                                           topic_name: str) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 3000})
    errors: list[KafkaError] = []
    p.produce(topic_name, value=b"x", on_delivery=lambda e, m: errors.append(e))
    p.flush(10)
    assert errors and errors[0] is not None
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert topic_name not in admin.list_topics(timeout=10).topics


def test_illegal_topic_name_is_refused(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for name in ["bad name", "a" * 250, "..", "x/y"]:
        with pytest.raises(KafkaException) as exc:
            admin.create_topics([NewTopic(name, 1, 1)])[name].result(10)
        assert exc.value.args[0].code() == KafkaError.TOPIC_EXCEPTION


def test_waiting_fetch_wakes_on_new_data(broker: BrokerProcess, topic_name: str) -> None:
    """A consumer with a 5 s fetch wait gets a new record long before the wait ends."""
    create_topic(broker.bootstrap, topic_name)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wake",
                  "fetch.wait.max.ms": 5000, "fetch.queue.backoff.ms": 0})
    c.assign([TopicPartition(topic_name, 0, OFFSET_BEGINNING)])
    c.poll(1.0)  # let the first (empty) fetch start waiting
    time.sleep(0.5)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    started = time.monotonic()
    p.produce(topic_name, value=b"wake up")
    p.flush(5)
    msg = None
    while msg is None and time.monotonic() - started < 10:
        msg = c.poll(0.05)
    elapsed = time.monotonic() - started
    c.close()
    assert msg is not None and msg.value() == b"wake up"
    assert elapsed < 1.0, f"the waiting fetch returned after {elapsed:.2f}s"


def test_fetch_limits_below_a_batch_still_read_every_partition(broker: BrokerProcess,
                                                               topic_name: str) -> None:
    """fetch.max.bytes and max.partition.fetch.bytes below a record batch: each fetch
    returns the first batch of the first partition with data (KIP-74), so a consumer of
    several partitions reads all of them to the end."""
    partitions, records, limit = 3, 200, 1024
    create_topic(broker.bootstrap, topic_name, partitions)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 100,
                         "batch.size": 4096, "compression.type": "none"})
    for i in range(records):
        for p in range(partitions):
            producer.produce(topic_name, f"{i:06d}".encode() * 85, partition=p)  # 510 B
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic_name,
                         "enable.auto.commit": False, "fetch.max.bytes": limit,
                         # librdkafka wants fetch.max.bytes ≥ its message.max.bytes
                         "max.partition.fetch.bytes": limit, "message.max.bytes": limit})
    consumer.assign([TopicPartition(topic_name, p, OFFSET_BEGINNING)
                     for p in range(partitions)])
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline and any(len(v) < records for v in got.values()):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got[msg.partition()].append(msg.value() or b"")
    finally:
        consumer.close()
    want = [f"{i:06d}".encode() * 85 for i in range(records)]
    assert {p: len(v) for p, v in got.items()} == dict.fromkeys(range(partitions), records)
    assert all(v == want for v in got.values())
