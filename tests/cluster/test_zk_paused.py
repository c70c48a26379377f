"""A ZooKeeper that stops answering holds up the admin call that needs it — and nothing
else: produce and fetch on the same broker go on at their usual latency (the admin
call's ZooKeeper write runs off the event loop)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.cluster.harness import Cluster, client_config, quiet_stderr


def _round_trips(bootstrap: str, topic: str, until: float) -> list[float]:
    """Produce one record and wait for its acknowledgement, over and over."""
    producer = Producer(client_config(bootstrap, **{"linger.ms": 0, "acks": 1}))
    took: list[float] = []
    try:
        while time.monotonic() < until:
            started = time.monotonic()
            producer.produce(topic, b"ping")
            assert producer.flush(10) == 0
            took.append(time.monotonic() - started)
    finally:
        producer.flush(5)
    return took


def test_a_paused_zookeeper_stalls_only_the_admin_call(tmp_path: Path) -> None:
    # a long session: the broker must not fence itself while ZooKeeper is paused here
    with Cluster(tmp_path, size=1, configs={"zookeeper.session.timeout.ms": "30000"}) as c:
        admin = c.admin()
        admin.create_topics([NewTopic("live", 1, 1)])["live"].result(30)
        _round_trips(c.bootstrap, "live", time.monotonic() + 1.0)  # warm: metadata known
        zk = c.zookeeper.proc
        assert zk is not None
        outcome: dict[str, Any] = {}

        def create_while_paused() -> None:
            try:
                admin.create_topics([NewTopic("stalled", 1, 1)],
                                    request_timeout=30)["stalled"].result(30)
                outcome["result"] = "created"
            except Exception as e:  # the broker's answer: REQUEST_TIMED_OUT
                outcome["result"] = e

        os.kill(zk.pid, signal.SIGSTOP)
        try:
            creator = threading.Thread(target=create_while_paused)
            creator.start()
            time.sleep(0.2)  # let the CreateTopics reach the broker and wait on ZooKeeper
            with quiet_stderr():
                took = _round_trips(c.bootstrap, "live", time.monotonic() + 2.5)
            assert creator.is_alive(), "the admin call should still be waiting on ZooKeeper"
        finally:
            os.kill(zk.pid, signal.SIGCONT)
        creator.join(60)
        took.sort()
        p99 = took[int(len(took) * 0.99) - 1]
        assert len(took) > 20 and p99 < 1.0, f"p99 {p99:.3f}s over {len(took)} round trips"
        # it waited on ZooKeeper; resumed, it either made it or timed out as Kafka's would
        assert outcome["result"] == "created" or "TIMED_OUT" in str(outcome["result"])
        # and once ZooKeeper is back, the same call works
        admin.create_topics([NewTopic("after", 1, 1)])["after"].result(30)
        consumer = Consumer(client_config(c.bootstrap, **{"group.id": "g",
                                                          "auto.offset.reset": "earliest"}))
        try:
            consumer.assign([TopicPartition("live", 0, 0)])
            got = consumer.consume(5, timeout=10)
            assert got and got[0].value() == b"ping"
        finally:
            consumer.close()
