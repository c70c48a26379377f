"""What the pipeline benchmarks share: a broker (given, or odradek started here) and data."""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.brokers import odradek_broker


@contextlib.contextmanager
def broker(bootstrap: str | None) -> Iterator[str]:
    """The given broker, or an odradek broker of our own for the run."""
    if bootstrap:
        yield bootstrap
        return
    with tempfile.TemporaryDirectory(prefix="pipeline-bench-") as tmp:
        b = odradek_broker(Path(tmp))
        b.start()
        try:
            yield b.bootstrap
        finally:
            b.stop()


def fill_topic(bootstrap: str, topic: str, values: list[bytes], total: int,
               partitions: int = 2) -> float:
    """Create the topic and produce `total` records cycling through `values`; return seconds."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.num.messages": 10_000, "compression.type": "lz4",
                         "queue.buffering.max.messages": 1_000_000})
    started = time.perf_counter()
    n = len(values)
    for i in range(total):
        while True:
            try:
                producer.produce(topic, values[i % n], key=b"dev-%03d" % (i % 100))
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)
    return time.perf_counter() - started
