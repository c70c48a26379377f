"""100,000 mutated frames at a live broker held to an 8 GiB address space (as a small
machine would hold it): the seeds are what real clients sent (confluent-kafka,
kafka-python and aiokafka through a recording proxy: produce, consume in a group,
commit, transactions, admin calls) and a request of every API at every version the
broker advertises. The broker never dies, another client's ApiVersions round trips
keep being answered (the slowest is printed), and RSS is back within 20% of what it
was before."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from odradek.protocol.messages import encode_request, request_class
from tests.clients.test_confluent_kafka import consume_all, create_topic
from tests.conftest import BrokerProcess, free_port
from tests.server.capture import RecordingProxy
from tests.server.test_every_api import _CASES, sample
from tests.server.test_fuzz import _mutate
from tests.wire import WireClient

FRAMES = 100_000
PER_CONNECTION = 8  # a bad frame closes its connection: the rest of the round is lost
ADDRESS_SPACE = 8 << 30
SLOWEST_S = 1.0  # the longest another client may wait for an answer (issue 11)


class LimitedBroker(BrokerProcess):
    """A broker whose address space is capped: a length claim turned into a giant
    allocation kills it (MemoryError at worst in Python, SIGKILL-like aborts in C). It
    advertises `proxy_port`, where the recording proxy listens."""

    def __init__(self, data_dir: Path, proxy_port: int) -> None:
        super().__init__(data_dir, overrides={
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}"})
        self.proxy_port = proxy_port

    def command(self) -> list[str]:
        return ["prlimit", f"--as={ADDRESS_SPACE}", "--", *super().command()]

    def rss(self) -> int:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")


def _real_client_traffic(bootstrap: str, topic: str) -> None:
    """What a day of clients sends: every request goes through the recording proxy."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(15)
    admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    admin.list_consumer_groups().result(15)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "compression.type": "lz4", "linger.ms": 5})
    for i in range(200):
        producer.produce(topic, key=f"k{i % 7}".encode(), value=b"v" * (i % 50),
                         headers={"h": b"x"})
    assert producer.flush(20) == 0
    tx = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"fuzz-{topic}"})
    tx.init_transactions(15)
    tx.begin_transaction()
    tx.produce(topic, b"in a transaction")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"fuzz-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 30
    while got < 200 and time.monotonic() < deadline:
        got += len([m for m in consumer.consume(50, 0.5) if m.error() is None])
    consumer.commit(asynchronous=False)
    tx.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                   consumer.consumer_group_metadata())
    tx.commit_transaction(15)
    consumer.close()

    from kafka import KafkaConsumer, KafkaProducer

    kp = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip")
    kp.send(topic, b"kafka-python").get(15)
    kp.close()
    kc = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"kp-{topic}",
                       auto_offset_reset="earliest", consumer_timeout_ms=30000)
    assert next(iter(kc)) is not None
    kc.commit()
    kc.close()

    async def aio() -> None:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        ap = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await ap.start()
        await ap.send_and_wait(topic, b"aiokafka", partition=0)
        await ap.stop()
        ac = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=f"aio-{topic}",
                              auto_offset_reset="earliest")
        await ac.start()
        ac.assign([__import__("aiokafka").TopicPartition(topic, 0)])
        await asyncio.wait_for(ac.getone(), 15)
        await ac.commit()
        await ac.stop()

    asyncio.run(aio())


def _every_api_frames(topic: str) -> list[bytes]:
    out = []
    for correlation, (api_key, version) in enumerate(_CASES, start=1):
        body = sample(request_class(api_key, version), topic)
        if api_key == 0:
            body = replace(body, acks=1)
        out.append(encode_request(api_key, version, correlation, "fuzz", body))
    return out


def _topics(bootstrap: str) -> set[str]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    return {t for t in metadata.topics if not t.startswith("__")}


def _fire(address: tuple[str, int], frames: list[bytes]) -> None:
    """One connection: the frames back to back, half-closed, answers drained."""
    with socket.create_connection(address, timeout=5) as s:
        try:
            s.sendall(b"".join(frames))
            s.shutdown(socket.SHUT_WR)
            s.settimeout(1.0)
            while s.recv(1 << 20):
                pass
        except OSError:
            pass  # closed by the broker, as it should on a bad frame


class Prober(threading.Thread):
    """Another client: ApiVersions round trips on one connection, the slowest kept."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True, name="fuzz-prober")
        self.bootstrap = bootstrap
        self.slowest = 0.0
        self.rounds = 0
        self.stopped = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with WireClient(self.bootstrap, timeout=30) as w:
                while not self.stopped.wait(0.01):
                    start = time.monotonic()
                    w.call(18, 3, client_software_name="prober", client_software_version="1")
                    self.slowest = max(self.slowest, time.monotonic() - start)
                    self.rounds += 1
        except BaseException as e:  # the assertion below reports it
            self.error = e


@pytest.fixture
def limited_broker(tmp_path: Path) -> Iterator[LimitedBroker]:
    broker = LimitedBroker(tmp_path / "data", free_port())
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def test_a_hundred_thousand_mutated_real_frames(limited_broker: LimitedBroker) -> None:
    broker = limited_broker
    host, port = broker.bootstrap.split(":")
    address = (host, int(port))
    proxy = RecordingProxy(address, broker.proxy_port)
    try:
        _fuzz(broker, proxy, address)
    finally:
        proxy.close()


def _fuzz(broker: LimitedBroker, proxy: RecordingProxy, address: tuple[str, int]) -> None:
    _real_client_traffic(proxy.address, "fuzzed")
    captured = list(proxy.frames)
    seen_apis = {int.from_bytes(f[4:6], "big") for f in captured}
    # produce, fetch, metadata, offsets, groups, transactions and admin, from real clients
    assert {0, 1, 2, 3, 8, 9, 10, 11, 12, 14, 18, 19, 22, 24, 25, 26, 28, 32} <= seen_apis
    # (their names are another topic's: the fuzz sends DeleteTopics too)
    seeds = captured + _every_api_frames("every-api")
    rng = random.Random(int(os.environ.get("ODRADEK_FUZZ_SEED", "20261127")))

    def rounds(n: int) -> None:
        for _ in range(n // PER_CONNECTION):
            _fire(address, [_mutate(rng, rng.choice(seeds)) for _ in range(PER_CONNECTION)])

    rounds(4_000)  # warm-up: the allocator's pools and the caches reach their size
    topics_before = _topics(broker.bootstrap)
    before = broker.rss()
    prober = Prober(broker.bootstrap)
    prober.start()
    started = time.monotonic()
    rounds(FRAMES)
    elapsed = time.monotonic() - started
    prober.stopped.set()
    prober.join(30)
    assert broker.alive(), broker.logs()
    assert prober.error is None, prober.error
    assert prober.rounds > 0
    # Issue 11 asks < 1 s. The 3.8 s once seen here was a mutated CreateTopics whose
    # num_partitions had become thousands: the broker opened every log in one go on the
    # event loop. A topic's logs now open in slices of the loop's time, and more than
    # Kafka's 10,000 records in one request are refused (test_admin_size_bounds.py)
    assert prober.slowest < SLOWEST_S, f"another client waited {prober.slowest:.2f}s"
    # Mutated CreateTopics make topics (up to Kafka's 10,000 partitions each), and which
    # ones depends on the frames captured, so on the machine's timing: that is state the
    # broker must keep, not a leak. They go before the memory is compared.
    created = _topics(broker.bootstrap) - topics_before
    if created:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.delete_topics(sorted(created)).values():
            future.exception(60)
        gone = time.monotonic() + 60
        while _topics(broker.bootstrap) & created and time.monotonic() < gone:
            time.sleep(0.2)
    deadline = time.monotonic() + 60  # closing connections are released as they close
    while broker.rss() > before * 1.2 and time.monotonic() < deadline:
        time.sleep(0.2)
    after = broker.rss()
    assert after <= before * 1.2, f"RSS {before >> 20} MiB before, {after >> 20} MiB after"
    print(f"\n{FRAMES} mutated frames in {elapsed:.1f}s; prober {prober.rounds} round trips, "
          f"slowest {prober.slowest * 1000:.0f} ms; RSS {before >> 20} -> {after >> 20} MiB; "
          f"{len(created)} topics made by the fuzz, deleted")
    # the broker still does real work
    create_topic(proxy.address, "after-fuzz")
    producer = Producer({"bootstrap.servers": proxy.address})
    producer.produce("after-fuzz", b"after the fuzz")
    assert producer.flush(15) == 0
    assert [m.value() for m in consume_all(proxy.address, "after-fuzz", 1)] == [
        b"after the fuzz"]
