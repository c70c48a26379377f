"""SIGKILL mid-stream: every acknowledged record is there after restart, in order, once."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer

from tests.clients.test_confluent_kafka import consume_all, create_topic
from tests.conftest import BrokerProcess


def test_sigkill_mid_stream_loses_no_acknowledged_record(fresh_broker: BrokerProcess,
                                                        topic_name: str) -> None:
    fresh_broker.overrides = {"log.segment.bytes": "200000", "log.flush.interval.ms": "50"}
    fresh_broker.start()
    create_topic(fresh_broker.bootstrap, topic_name, partitions=2)
    acked: list[bytes] = []
    lock = threading.Lock()

    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            with lock:
                acked.append(msg.value())  # type: ignore[attr-defined]

    p = Producer({"bootstrap.servers": fresh_broker.bootstrap, "acks": "all",
                  "enable.idempotence": True, "linger.ms": 2,
                  "message.timeout.ms": 5000, "retries": 2})
    i = 0
    started = time.monotonic()
    killed = False
    while time.monotonic() - started < 6:
        try:
            p.produce(topic_name, key=b"%d" % (i % 10), value=b"rec-%08d" % i,
                      on_delivery=on_delivery)
            i += 1
        except BufferError:
            pass
        p.poll(0)
        if not killed and len(acked) > 3000:
            fresh_broker.kill()
            killed = True
            break
    p.flush(10)
    assert killed, "the producer must have been mid-stream when the broker died"
    with lock:
        acknowledged = list(acked)
    fresh_broker.start()
    got = consume_all(fresh_broker.bootstrap, topic_name, len(acknowledged), timeout=30)
    values = [m.value() for m in got]
    assert len(values) == len(set(values)), "no duplicates"
    assert set(acknowledged) <= set(values), "every acknowledged record survived"
    for part in {m.partition() for m in got}:
        offsets = [m.offset() for m in got if m.partition() == part]
        assert offsets == list(range(len(offsets)))
        seqs = [int(m.value()[4:]) for m in got if m.partition() == part]
        assert seqs == sorted(seqs), "order within a partition is kept"


def test_clean_restart_keeps_topics_configs_and_data(fresh_broker: BrokerProcess,
                                                    topic_name: str) -> None:
    fresh_broker.start()
    create_topic(fresh_broker.bootstrap, topic_name, partitions=3, **{"retention.ms": "123456"})
    p = Producer({"bootstrap.servers": fresh_broker.bootstrap})
    for i in range(100):
        p.produce(topic_name, value=b"%d" % i)
    p.flush(10)
    fresh_broker.restart()
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    assert admin.describe_configs([res])[res].result(10)["retention.ms"].value == "123456"
    assert len(consume_all(fresh_broker.bootstrap, topic_name, 100)) == 100
