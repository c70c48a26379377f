"""The Prometheus endpoint of a real broker, scraped over HTTP after real produce,
consume and group activity: the values a user would check."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.cli.groups import describe_rows
from odradek.protocol.errors import ErrorCode
from tests.groups.helpers import create_topic, member, poll_until, produce, unique
from tests.monitoring.conftest import MetricsBroker, value, wait_for
from tests.server.test_wire import produce as wire_produce
from tests.wire import WireClient

METADATA = 3


def test_request_counts_go_up_by_the_requests_sent(metrics_broker: MetricsBroker) -> None:
    before = metrics_broker.scrape()
    with WireClient(metrics_broker.bootstrap) as c:
        for _ in range(5):
            c.call(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                   include_topic_authorized_operations=False)
    after = metrics_broker.scrape()
    for name in ("kafka_network_requestmetrics_requests_total",
                 "kafka_network_requestmetrics_totaltimems_count"):
        assert value(after, name, request="Metadata") - value(before, name,
                                                              request="Metadata") == 5
    took = (value(after, "kafka_network_requestmetrics_totaltimems_sum", request="Metadata")
            - value(before, "kafka_network_requestmetrics_totaltimems_sum", request="Metadata"))
    assert 0 < took < 5 * 1000, "milliseconds, not seconds or microseconds"


def test_produce_counts_per_topic_and_failed_produces(metrics_broker: MetricsBroker) -> None:
    b, topic = metrics_broker.bootstrap, unique("metrics")
    create_topic(b, topic, 2)
    before = metrics_broker.scrape()
    p = Producer({"bootstrap.servers": b, "linger.ms": 0})
    for i in range(7):  # one request each: flushed one at a time
        p.produce(topic, value=b"x" * 100, partition=i % 2)
        assert p.flush(10) == 0
    after = metrics_broker.scrape()

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("kafka_network_requestmetrics_requests_total", request="Produce") == 7
    assert delta("kafka_server_brokertopicmetrics_totalproducerequests_total", topic=topic) == 7
    assert delta("kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 7
    assert delta("kafka_server_brokertopicmetrics_bytesin_total", topic=topic) > 700
    assert delta("kafka_server_brokertopicmetrics_failedproducerequests_total",
                 topic=topic) == 0

    with WireClient(b) as c:
        code, _ = wire_produce(c, "no-such-topic", b"not a batch")
    assert code == ErrorCode.unknown_topic_or_partition
    failed = metrics_broker.scrape()
    assert value(failed, "kafka_server_brokertopicmetrics_failedproducerequests_total",
                 topic="no-such-topic") == 1
    assert value(failed, "kafka_network_requestmetrics_errors_total", request="Produce",
                 error="UNKNOWN_TOPIC_OR_PARTITION") >= 1


def test_group_lag_gauge_equals_the_real_lag(metrics_broker: MetricsBroker) -> None:
    b, topic, group = metrics_broker.bootstrap, unique("lag"), unique("g")
    create_topic(b, topic, 2)
    produce(b, topic, 30, 2)  # 15 per partition
    consumer = member(b, group, topic, "lagging")
    poll_until([consumer], lambda: len(consumer.messages) >= 30, 20)
    consumer.consumer.commit(offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 10)],
                             asynchronous=False)
    consumer.close()
    _, rows = describe_rows(b, group)
    real = {(t, p): lag for _, t, p, _, _, lag, *_ in rows}
    assert real == {(topic, 0): 11, (topic, 1): 5}

    def gauges_match() -> bool:
        s = metrics_broker.scrape()
        return all(value(s, "kafka_consumergroup_lag", consumergroup=group, topic=t,
                         partition=str(p)) == lag for (t, p), lag in real.items()) \
            and value(s, "kafka_consumergroup_lag_sum", consumergroup=group, topic=topic) == 16

    wait_for(gauges_match)
    s = metrics_broker.scrape()
    assert value(s, "kafka_consumergroup_current_offset", consumergroup=group, topic=topic,
                 partition="0") == 4
    assert value(s, "kafka_consumergroup_members", consumergroup=group) == 0

    produce(b, topic, 10, 2)  # the group is gone: its lag grows by what arrives
    wait_for(lambda: value(metrics_broker.scrape(), "kafka_consumergroup_lag_sum",
                           consumergroup=group, topic=topic) == 26)


def test_log_gauges_match_the_log_on_disk_and_the_watermarks(
        metrics_broker: MetricsBroker) -> None:
    b, topic = metrics_broker.bootstrap, unique("logs")
    create_topic(b, topic, 1)
    produce(b, topic, 25, 1)
    probe = Consumer({"bootstrap.servers": b, "group.id": "probe"})
    low, high = probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    probe.close()
    on_disk = sum(f.stat().st_size for f in
                  (metrics_broker.data_dir / f"{topic}-0").glob("*.log"))

    def matches() -> bool:
        s = metrics_broker.scrape()
        labels = {"topic": topic, "partition": "0"}
        return (value(s, "kafka_log_log_logendoffset", **labels) == high == 25
                and value(s, "kafka_log_log_logstartoffset", **labels) == low == 0
                and value(s, "kafka_log_log_size", **labels) == on_disk > 0
                and value(s, "kafka_log_log_numlogsegments", **labels) == 1)

    wait_for(matches)


def test_cluster_health_gauges_of_a_healthy_broker(metrics_broker: MetricsBroker) -> None:
    b, topic = metrics_broker.bootstrap, unique("health")
    create_topic(b, topic, 3)

    def counted() -> bool:
        s = metrics_broker.scrape()
        with_topic = [k for k in s if k[0] == "kafka_log_log_size" and ("topic", topic) in k[1]]
        return len(with_topic) == 3

    wait_for(counted)
    s = metrics_broker.scrape()
    hosted = value(s, "kafka_server_replicamanager_partitioncount")
    assert hosted == len([k for k in s if k[0] == "kafka_log_log_size"])
    assert value(s, "kafka_server_replicamanager_leadercount") == hosted
    assert value(s, "kafka_controller_kafkacontroller_globalpartitioncount") == hosted
    assert value(s, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    for healthy_zero in ("kafka_controller_kafkacontroller_offlinepartitionscount",
                         "kafka_server_replicamanager_underreplicatedpartitions",
                         "kafka_server_replicamanager_underminisrpartitioncount",
                         "kafka_log_logmanager_offlinelogdirectorycount",
                         "kafka_server_replicamanager_isrshrinks_total"):
        assert value(s, healthy_zero) == 0, healthy_zero
    data_dir = str(metrics_broker.data_dir.resolve())
    assert value(s, "kafka_log_logmanager_logdirectoryoffline", logdirectory=data_dir) == 0
    assert value(s, "odradek_log_dir_total_bytes", logdirectory=data_dir) > 0
