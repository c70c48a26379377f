"""Prometheus metrics under Kafka's metric names."""

from __future__ import annotations

import urllib.request

from confluent_kafka import Producer

from tests.clients.test_confluent_kafka import create_topic
from tests.conftest import BrokerProcess, free_port


def test_bytes_in_per_topic_are_exported(fresh_broker: BrokerProcess, topic_name: str) -> None:
    port = free_port()
    fresh_broker.overrides = {"metrics.port": str(port)}
    fresh_broker.start()
    create_topic(fresh_broker.bootstrap, topic_name)
    p = Producer({"bootstrap.servers": fresh_broker.bootstrap})
    for _ in range(10):
        p.produce(topic_name, value=b"x" * 100)
    p.flush(10)
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    lines = [line for line in text.splitlines()
             if line.startswith("kafka_server_brokertopicmetrics_messagesin_total")
             and topic_name in line]
    assert lines and float(lines[0].split()[-1]) == 10.0
    assert "kafka_server_replicamanager_partitioncount 1.0" in text
