"""Prometheus metrics under Kafka's JMX names, as the JMX exporter renders them.

Each broker gets its own registry so that several brokers in one process (tests) do not
collide.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.bytes_in = Counter(
            "kafka_server_brokertopicmetrics_bytesin", "Bytes produced to the broker",
            ["topic"], registry=r)
        self.messages_in = Counter(
            "kafka_server_brokertopicmetrics_messagesin", "Records produced to the broker",
            ["topic"], registry=r)
        self.bytes_out = Counter(
            "kafka_server_brokertopicmetrics_bytesout", "Bytes fetched from the broker",
            registry=r)
        self.partitions = Gauge(
            "kafka_server_replicamanager_partitioncount", "Partitions on this broker",
            registry=r)
        self.under_replicated = Gauge(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions with fewer in-sync replicas than replicas", registry=r)
        self.connections = Gauge(
            "kafka_server_socketservermetrics_connection_count", "Open client connections",
            registry=r)

    def on_produce(self, topic: str, nbytes: int, records: int) -> None:
        self.bytes_in.labels(topic).inc(nbytes)
        self.messages_in.labels(topic).inc(records)

    def on_fetch(self, nbytes: int) -> None:
        if nbytes:
            self.bytes_out.inc(nbytes)
