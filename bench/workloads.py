"""Issue 7's workloads: what each one does to a broker and which numbers it reports."""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from bench.brokers import Broker
from bench.clients import Client, ClientFailed, Throughput


@dataclass(frozen=True)
class Sizes:
    """How much each workload sends; `QUICK` is the CI smoke run's."""

    small_records: int = 1_000_000  # of 100 B
    large_records: int = 200_000  # of 1 KB
    latency_rate: int = 5_000  # records/s
    latency_seconds: float = 10.0
    deep_batches: int = 20_000
    deep_offset: int = 10_000
    deep_tries: int = 5
    deep_timeout: float = 10.0  # the peer may never answer
    tail_rate: int = 200
    tail_seconds: float = 10.0
    client_timeout: float = 300.0  # a hard limit on any one client run


FULL = Sizes()
QUICK = Sizes(small_records=5_000, large_records=1_000, latency_seconds=0.6, deep_batches=300,
              deep_offset=150, deep_tries=2, deep_timeout=5.0, tail_seconds=2.0,
              client_timeout=60.0)

SMALL, LARGE = 100, 1000


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str  # produce | consume | latency | deep-fetch | tail
    record_size: int = SMALL
    partitions: int = 1
    acks: str = "1"
    fetch_wait_ms: int = 500
    # The null sink keeps nothing: only producing means anything against it.
    on_limit: bool = False

    def records(self, sizes: Sizes) -> int:
        return sizes.small_records if self.record_size == SMALL else sizes.large_records


def _size_label(size: int) -> str:
    return "100B" if size == SMALL else "1KB"


def all_workloads() -> list[Workload]:
    out: list[Workload] = []
    for size in (SMALL, LARGE):
        for parts in (1, 6):
            for acks in ("1", "all"):
                out.append(Workload(f"produce-{_size_label(size)}-p{parts}-acks{acks}",
                                    "produce", size, parts, acks, on_limit=True))
    for size in (SMALL, LARGE):
        for parts in (1, 6):
            out.append(Workload(f"consume-{_size_label(size)}-p{parts}", "consume", size, parts))
    out.append(Workload("latency-fetchwait10", "latency", fetch_wait_ms=10))
    out.append(Workload("latency-fetchwait500", "latency", fetch_wait_ms=500))
    out.append(Workload("deep-fetch", "deep-fetch"))
    out.append(Workload("tail-200", "tail"))
    return out


def source_of(w: Workload) -> Workload:
    """The produce workload whose topic a consume workload reads."""
    return replace(w, name=f"produce-{_size_label(w.record_size)}-p{w.partitions}-acks1",
                   kind="produce", acks="1", on_limit=True)


# --- topics ----------------------------------------------------------------------------

def admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Creates the topic (auto-create is off in odradek) and waits until it has leaders."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined,unused-ignore]

    client = admin(bootstrap)
    future = client.create_topics([NewTopic(topic, partitions, 1)],
                                  operation_timeout=timeout, request_timeout=timeout)[topic]
    try:
        future.result(timeout)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise ClientFailed(f"create topic {topic}: {e.args[0].str()}") from e
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # bounded by the deadline
        md = client.list_topics(topic, timeout=5).topics.get(topic)
        if (md is not None and md.error is None and len(md.partitions) == partitions
                and all(p.leader >= 0 for p in md.partitions.values())):
            return
        time.sleep(0.1)
    raise ClientFailed(f"topic {topic} has no leader for every partition after {timeout:.0f}s")


# --- the measurements ------------------------------------------------------------------

Metrics = dict[str, float]


@dataclass
class Context:
    broker: Broker
    client: Client
    sizes: Sizes
    filled: set[str]  # topics whose produce workload completed on this broker


def _topic(name: str) -> str:
    return f"bench-{name}"


def _measured(broker: Broker, fn: Callable[[], Throughput]) -> Metrics:
    """Runs one client; its throughput and the broker's CPU per MB moved (user + system,
    and system alone)."""
    user0, sys0 = broker.cpu_split()
    r = fn()
    user1, sys1 = broker.cpu_split()
    mb = r.bytes / 1e6
    return {"msgs_per_s": r.msgs_per_s, "mb_per_s": r.mb_per_s,
            "cpu_ms_per_mb": (user1 - user0 + sys1 - sys0) * 1000 / mb,
            "sys_ms_per_mb": (sys1 - sys0) * 1000 / mb, "bytes": r.bytes}


def run_produce(ctx: Context, w: Workload) -> Metrics:
    topic = _topic(w.name)
    create_topic(ctx.broker.bootstrap, topic, w.partitions)
    n = w.records(ctx.sizes)
    m = _measured(ctx.broker, lambda: ctx.client.produce(
        ctx.broker.bootstrap, topic, n, w.record_size, w.acks, ctx.sizes.client_timeout))
    ctx.broker.bytes_in += int(m.pop("bytes"))
    ctx.filled.add(topic)
    return m


def run_consume(ctx: Context, w: Workload) -> Metrics:
    src = source_of(w)
    topic = _topic(src.name)
    n = w.records(ctx.sizes)
    if topic not in ctx.filled:  # its produce workload was not selected: fill unmeasured
        create_topic(ctx.broker.bootstrap, topic, w.partitions)
        r = ctx.client.produce(ctx.broker.bootstrap, topic, n, w.record_size, "1",
                               ctx.sizes.client_timeout)
        ctx.broker.bytes_in += r.bytes
        ctx.filled.add(topic)
    m = _measured(ctx.broker, lambda: ctx.client.consume(
        ctx.broker.bootstrap, topic, w.partitions, n, ctx.sizes.client_timeout))
    m.pop("bytes")
    return m


def run_latency(ctx: Context, w: Workload) -> Metrics:
    topic = _topic(f"{w.name}-{uuid.uuid4().hex[:6]}")
    create_topic(ctx.broker.bootstrap, topic, 1)
    s = ctx.sizes
    records = int(s.latency_rate * s.latency_seconds)
    warmup = min(s.latency_rate, records // 10)  # one second, or a tenth of a short run
    # A paced run has a known length: a broker that stops answering fails it in a minute.
    timeout = min(s.client_timeout, 3 * s.latency_seconds + 60)
    lat = ctx.client.latency(ctx.broker.bootstrap, topic, records, s.latency_rate, SMALL,
                             w.fetch_wait_ms, warmup, timeout)
    ctx.broker.bytes_in += records * SMALL
    return {"p50_ms": lat.p50_ms, "p99_ms": lat.p99_ms, "p999_ms": lat.p999_ms,
            "max_ms": lat.max_ms}


def _one_record_batches(bootstrap: str, topic: str, count: int, timeout: float) -> None:
    """Fills partition 0 with `count` batches of one record each."""
    from confluent_kafka import Producer

    failures: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 2, "linger.ms": 0,
                         "batch.num.messages": 1, "acks": "1"})
    deadline = time.monotonic() + timeout
    value = b"d" * SMALL
    for i in range(count):
        while True:  # bounded by the deadline
            try:
                producer.produce(topic, value, partition=0,
                                 on_delivery=lambda err, _m: failures.append(err.str())
                                 if err else None)
                break
            except BufferError:
                producer.poll(0.01)
                if time.monotonic() > deadline:
                    raise ClientFailed(f"filling {topic}: {i} of {count} queued in time") from None
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(max(1.0, deadline - time.monotonic()))
    if left or failures:
        raise ClientFailed(f"filling {topic}: {left} undelivered, {len(failures)} failed "
                           f"{failures[:1]}")


def _first_record_seconds(bootstrap: str, topic: str, offset: int, last: int,
                          timeout: float) -> float | None:
    """Time from assign() at `offset` to that record's arrival. None: not within timeout.

    librdkafka keeps one fetch in flight per broker, and it learns a topic's metadata on
    first use; either would be timed instead of the broker's deep read. So the consumer
    first reads the partition's last record (metadata and connection ready), lets its
    waiting fetch at the end expire, and only then is sent deep."""
    from confluent_kafka import Consumer, TopicPartition

    wait_ms = 500
    consumer = Consumer({"bootstrap.servers": bootstrap, "log_level": 2,
                         "group.id": f"bench-deep-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": wait_ms})
    try:
        consumer.assign([TopicPartition(topic, 0, last)])
        msg = consumer.poll(timeout)
        if msg is None or msg.error() is not None:
            raise ClientFailed(f"warm-up read of offset {last} got {msg and msg.error()}")
        consumer.unassign()
        time.sleep(wait_ms / 1000 + 0.1)
        t0 = time.perf_counter()
        consumer.assign([TopicPartition(topic, 0, offset)])
        deadline = t0 + timeout
        while time.perf_counter() < deadline:  # bounded by the deadline
            msg = consumer.poll(0.01)
            if msg is None or msg.error() is not None:
                continue
            elapsed = time.perf_counter() - t0
            if msg.offset() != offset:
                raise ClientFailed(f"first record at offset {msg.offset()}, not {offset}")
            return elapsed
        return None
    finally:
        consumer.close()


def run_deep_fetch(ctx: Context, w: Workload) -> Metrics:
    s = ctx.sizes
    b = ctx.broker.bootstrap
    topic = _topic("deep-fetch")
    create_topic(b, topic, 1)
    _one_record_batches(b, topic, s.deep_batches, s.client_timeout)
    ctx.broker.bytes_in += s.deep_batches * SMALL
    times: list[float] = []
    for _ in range(s.deep_tries):
        t = _first_record_seconds(b, topic, s.deep_offset, s.deep_batches - 1, s.deep_timeout)
        if t is None:
            raise ClientFailed(f"no record from offset {s.deep_offset} within "
                               f"{s.deep_timeout:.0f}s")
        times.append(t)
        if t > 1.0:  # a slow broker: a couple of tries tell enough
            break
    return {"first_record_ms": statistics.median(times) * 1000}


def run_tail(ctx: Context, w: Workload) -> Metrics:
    """A producer of one-record batches at a low rate and a consumer tailing it: what the
    broker spends on mostly-waiting fetches (its CPU) and how late records arrive."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    s = ctx.sizes
    b = ctx.broker.bootstrap
    topic = _topic(f"tail-{uuid.uuid4().hex[:6]}")
    create_topic(b, topic, 1)
    producer = Producer({"bootstrap.servers": b, "log_level": 2, "linger.ms": 0,
                         "batch.num.messages": 1, "acks": "1"})
    consumer = Consumer({"bootstrap.servers": b, "log_level": 2,
                         "group.id": f"bench-tail-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    received = 0
    delays: list[float] = []
    stop = threading.Event()
    thread = threading.Thread(target=lambda: tail(), name="bench-tail", daemon=True)

    def tail() -> None:
        nonlocal received
        while not stop.is_set():  # bounded: the producer side sets stop, then joins
            msg = consumer.poll(0.05)
            if msg is None or msg.error() is not None:
                continue
            received += 1
            delays.append(time.time() - float(msg.value() or b"0"))

    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        thread.start()
        warmup = 1.0
        total = warmup + s.tail_seconds
        start = t_cpu0 = time.monotonic()
        cpu0 = None
        sent = 0
        while (elapsed := time.monotonic() - start) < total:  # bounded by `total`
            if cpu0 is None and elapsed >= warmup:
                cpu0, t_cpu0 = ctx.broker.cpu(), time.monotonic()
            producer.produce(topic, f"{time.time():.6f}".encode())
            producer.poll(0)
            sent += 1
            ahead = start + sent / s.tail_rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        cpu = ctx.broker.cpu() - (cpu0 or 0.0)
        window = time.monotonic() - t_cpu0
        producer.flush(10)
        time.sleep(0.6)  # one default fetch.wait.max.ms, for the last records to arrive
    finally:
        stop.set()
        if thread.is_alive():
            thread.join(5)
        consumer.close()
    if received < sent:
        raise ClientFailed(f"tailing consumer saw {received} of {sent} records")
    ctx.broker.bytes_in += sent * 17
    delays.sort()
    return {"cpu_pct": cpu / window * 100, "p99_ms": delays[int(len(delays) * 0.99)] * 1000}


RUNNERS: dict[str, Callable[[Context, Workload], Metrics]] = {
    "produce": run_produce,
    "consume": run_consume,
    "latency": run_latency,
    "deep-fetch": run_deep_fetch,
    "tail": run_tail,
}


def run(ctx: Context, w: Workload) -> Metrics:
    try:
        return RUNNERS[w.kind](ctx, w)
    except ClientFailed:
        raise
    except Exception as e:  # a client library error is a failed workload, not a crash
        raise ClientFailed(f"{type(e).__name__}: {e}") from e
