"""Client quotas enforced on a real broker with confluent-kafka: a producer and a
consumer held to their byte rates (within 20%, measured after the quota's window has
filled, as Kafka's sampled rate allows a first burst) with throttle events reported
by librdkafka, while clients of another client-id on the same broker run unslowed.

The broker runs with `quota.window.num=4` so the rate settles within seconds; the
rates are of payload bytes, a few percent under the request and response bytes the
broker counts."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import BrokerProcess
from tests.quotas.test_client_quotas_admin import Quotas

RATE = 200_000  # bytes per second
VALUE = b"x" * 2000
SETTLE_S, MEASURE_S = 4.0, 4.0


@pytest.fixture(scope="module")
def throttling_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("throttle") / "data", overrides={
        "quota.window.num": "4", "group.initial.rebalance.delay.ms": "0"}).start()
    try:
        q = Quotas(process.bootstrap)
        assert q.alter({"client-id": "slow"}, {"producer_byte_rate": RATE,
                                               "consumer_byte_rate": RATE})[0] == 0
        q.close()
        yield process
    finally:
        process.stop()


def _create(broker: BrokerProcess, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # alive until done
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)


def _rate(times: list[float], lo: float, hi: float) -> float:
    """Bytes per second of VALUE-sized messages arrived in [lo, hi)."""
    return sum(1 for t in times if lo <= t < hi) * len(VALUE) / (hi - lo)


class Run:
    def __init__(self) -> None:
        self.times: list[float] = []
        self.throttles: list[float] = []
        self.errors: list[Any] = []


def _produce(bootstrap: str, topic: str, client_id: str, run: Run, until: float,
             limit: int) -> None:
    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            run.errors.append(err)
        else:
            run.times.append(time.monotonic())

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id,
                         "batch.size": 16384, "linger.ms": 2,
                         "queue.buffering.max.kbytes": 256,
                         "throttle_cb": lambda e: run.throttles.append(e.throttle_time)})
    sent = 0
    while time.monotonic() < until and sent < limit:
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
            sent += 1
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.flush(30)


def test_producer_is_held_to_its_byte_rate_and_others_are_not(
        throttling_broker: BrokerProcess) -> None:
    _create(throttling_broker, "produce-quota")
    slow, fast = Run(), Run()
    start = time.monotonic()
    until = start + SETTLE_S + MEASURE_S
    threads = [
        threading.Thread(target=_produce, args=(throttling_broker.bootstrap, "produce-quota",
                                                "slow", slow, until, 10**9)),
        threading.Thread(target=_produce, args=(throttling_broker.bootstrap, "produce-quota",
                                                "fast", fast, until, 2000)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not slow.errors and not fast.errors
    rate = _rate(slow.times, start + SETTLE_S, start + SETTLE_S + MEASURE_S)
    assert 0.8 * RATE <= rate <= 1.2 * RATE, f"slow producer at {rate:.0f} B/s"
    assert slow.throttles and max(slow.throttles) > 0
    # the other client-id sent its 4 MB at well over the quota, never throttled
    assert len(fast.times) == 2000 and not fast.throttles
    assert fast.times[-1] - start < 2000 * len(VALUE) / (3 * RATE)


def test_consumer_is_held_to_its_byte_rate_and_others_are_not(
        throttling_broker: BrokerProcess) -> None:
    topic = "fetch-quota"
    _create(throttling_broker, topic)
    filler = Run()
    _produce(throttling_broker.bootstrap, topic, "filler", filler, time.monotonic() + 60, 2000)
    assert len(filler.times) == 2000

    def consume(client_id: str, run: Run, until: float) -> None:
        consumer = Consumer({
            "bootstrap.servers": throttling_broker.bootstrap, "client.id": client_id,
            "group.id": f"g-{client_id}", "auto.offset.reset": "earliest",
            "fetch.max.bytes": 16384, "max.partition.fetch.bytes": 16384,
            "message.max.bytes": 16384,
            "enable.auto.commit": False,
            "throttle_cb": lambda e: run.throttles.append(e.throttle_time)})
        consumer.subscribe([topic])
        try:
            while time.monotonic() < until and len(run.times) < 2000:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    run.times.append(time.monotonic())
        finally:
            consumer.close()

    slow, fast = Run(), Run()
    start = time.monotonic()
    until = start + 2 * MEASURE_S + 6  # the consumer joins its group first
    threads = [threading.Thread(target=consume, args=("slow", slow, until)),
               threading.Thread(target=consume, args=("fast", fast, until))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert slow.times, "the throttled consumer got nothing"
    # From its first message (after the group join) over two windows' worth: a
    # consumer's rate comes in bursts, as Kafka's (a throttled fetch is answered empty
    # and taken back from the rate, so the rate falls and the next fetches pass at once)
    first = slow.times[0]
    rate = _rate(slow.times, first, first + 2 * MEASURE_S)
    assert 0.8 * RATE <= rate <= 1.2 * RATE, f"slow consumer at {rate:.0f} B/s"
    assert slow.throttles and max(slow.throttles) > 0
    assert len(fast.times) == 2000 and not fast.throttles
    assert fast.times[-1] - fast.times[0] < 2000 * len(VALUE) / (3 * RATE)


def test_request_percentage_throttles_and_mutes_the_connection(
        throttling_broker: BrokerProcess) -> None:
    from tests.wire import WireClient

    q = Quotas(throttling_broker.bootstrap)
    assert q.alter({"client-id": "wire-test"}, {"request_percentage": 0.01})[0] == 0
    q.close()
    with WireClient(throttling_broker.bootstrap) as client:
        for _ in range(500):
            response = client.call(3, 12, topics=None, allow_auto_topic_creation=False,
                                   include_topic_authorized_operations=False)
            throttled = response.throttle_time.total_seconds()
            if throttled > 0:
                break
        assert throttled > 0, "500 metadata requests never throttled at 0.01%"
        assert throttled <= 1.0  # a request quota's throttle is at most one window
        # muted: the next request is not even read until the throttle time is up
        started = time.monotonic()
        client.call(3, 12, topics=None, allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False)
        assert time.monotonic() - started >= 0.8 * throttled
