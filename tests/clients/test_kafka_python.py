"""kafka-python 3 against a real broker: it is idempotent by default (InitProducerId first)."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import TopicAlreadyExistsError

from tests.conftest import BrokerProcess


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_produce_consume(broker: BrokerProcess, topic_name: str, codec: str | None) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic_name, 2, 1)])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec,
                             linger_ms=5)
    futures = [
        producer.send(topic_name, key=f"k{i}".encode(), value=f"v{i}".encode(),
                      headers=[("n", str(i).encode())])
        for i in range(200)
    ]
    producer.flush(15)
    metas = [f.get(10) for f in futures]
    assert all(m.offset >= 0 for m in metas)
    producer.close()
    consumer = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=5000, group_id=None)
    got = list(consumer)
    consumer.close()
    assert sorted(m.value for m in got) == sorted(f"v{i}".encode() for i in range(200))
    assert all(dict(m.headers)["n"] == m.value[1:] for m in got)
    admin.close()


def test_offsets_and_admin(broker: BrokerProcess, topic_name: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic_name, 1, 1, topic_configs={"segment.bytes": "1048576"})])
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic(topic_name, 1, 1)])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    base = int(time.time() * 1000) - 5000
    for i in range(5):
        producer.send(topic_name, value=b"x", timestamp_ms=base + i * 100).get(10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = TopicPartition(topic_name, 0)
    assert consumer.beginning_offsets([tp])[tp] == 0
    assert consumer.end_offsets([tp])[tp] == 5
    assert consumer.offsets_for_times({tp: base + 250})[tp].offset == 3
    consumer.close()
    admin.create_partitions({topic_name: NewPartitions(3)})
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name)])
    topic_configs = next(iter(configs.values()))[topic_name]
    segment = topic_configs["segment.bytes"]
    assert (segment["value"] if isinstance(segment, dict) else segment) == "1048576"
    dirs = admin.describe_log_dirs()
    assert topic_name in repr(dirs), "the log dir listing names the topic's partitions"
    admin.delete_topics([topic_name])
    admin.close()
