"""Share groups' metrics on the broker's Prometheus endpoint, after a real
confluent-kafka ShareConsumer run (Kafka's KIP-932 / KIP-1103 names, JMX-exporter style).

The broker is the module's short-lock one, shared with other tests: broker-wide
counters are compared before and after, per-group series are this test's own."""

from __future__ import annotations

from confluent_kafka import AcknowledgeType

from tests.conftest import BrokerProcess
from tests.share.helpers import (
    earliest_group,
    metric,
    new_topic,
    poll_until,
    produce,
    scrape,
    share_consumer,
    wait_for,
)
from tests.share.test_share_wire import (
    ACCEPT,
    INVALID_RECORD_STATE,
    Share,
    acquired,
    partition_error,
)
from tests.wire import WireClient

ACKS = "kafka_server_sharegroupmetrics_recordacknowledgements_total"
TOPIC_STATS = "kafka_server_brokertopicmetrics_"
WRITES = "kafka_server_share_coordinator_metrics_write_latency_count"


def test_share_group_metrics_count_what_a_share_consumer_did(
        short_lock_broker: BrokerProcess) -> None:
    bootstrap = short_lock_broker.bootstrap
    port = int(short_lock_broker.overrides["metrics.port"])
    before = scrape(port)
    topic = new_topic(bootstrap)
    group = earliest_group(bootstrap)
    produce(bootstrap, topic, ["a", "b", "c"])
    with share_consumer(bootstrap, group, topic) as c:
        first = poll_until(c, lambda seen: len(seen) >= 3)
        for m, kind in zip(first, (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE,
                                   AcknowledgeType.REJECT), strict=True):
            c.acknowledge(m, kind)
        assert all(e is None for e in c.commit_sync(30).values())
        again = poll_until(c, lambda seen: len(seen) >= 1,
                           on_batch=lambda b: [c.acknowledge(m) for m in b])
        assert [(m.offset(), m.delivery_count()) for m in again] == [(1, 2)]
        assert all(e is None for e in c.commit_sync(30).values())

    # a member that holds a record past its lock, and acknowledges one it does not hold
    tp = {"group": group, "topic": topic, "partition": "0"}
    with WireClient(bootstrap) as w:
        m = Share(w, group, "holder")
        m.join(topic)
        produce(bootstrap, topic, ["d"])
        got: list[tuple[int, int, int]] = []
        while not got:
            r = m.fetch(wait_ms=5000)
            assert r.error_code == 0, r
            got = acquired(r)
        assert got == [(3, 3, 1)]
        assert partition_error(m.ack([(0, 0, (ACCEPT,))])) == INVALID_RECORD_STATE

        def settled() -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
            s = scrape(port)
            timed_out = metric(
                s, "kafka_server_sharepartitionmetrics_acquisitionlocktimeout_total", **tp)
            # gauges are refreshed every few seconds: one after d was acquired shows it
            # in flight (acquired, then available again after its lock timed out)
            in_flight = metric(
                s, "kafka_server_sharepartitionmetrics_inflightmessagecount", **tp)
            return s if timed_out == 1 and in_flight == 1 else None

        after = wait_for(settled, 30, "no lock timeout or no record in flight")

    def grew(name: str, **labels: str) -> float:
        return metric(after, name, **labels) - metric(before, name, **labels)

    assert {t: grew(ACKS, ackType=t) for t in ("Accept", "Release", "Reject")} == \
        {"Accept": 2, "Release": 1, "Reject": 1}
    assert grew("odradek_share_records_acquired_total") == 5  # a b c, b again, d
    assert grew("odradek_share_records_redelivered_total") == 1
    # the holder is still a member
    assert metric(after, "kafka_server_group_coordinator_metrics_share_group_count",
                  state="Stable") >= 1
    assert metric(after, "kafka_server_group_coordinator_metrics_group_count",
                  protocol="share") >= 1
    assert metric(after, TOPIC_STATS + "totalsharefetchrequests_total", topic=topic) >= 3
    assert metric(after, TOPIC_STATS + "totalshareacknowledgementrequests_total",
                  topic=topic) >= 3
    assert metric(after, TOPIC_STATS + "failedshareacknowledgementrequests_total",
                  topic=topic) == 1
    # every acknowledgement waited for its state write, and each write was timed
    assert grew(WRITES) >= 3
    assert grew("kafka_server_share_coordinator_metrics_write_latency_sum") > 0
