"""A broker process reuses the heap a request freed (server/heap.py).

Before, glibc gave the freed top of its heap back to the kernel after every large
produce request, and the next one faulted fresh pages in: 570 minor page faults per MB
produced, over half the broker's CPU on this VM. The count is the process's own, read
from /proc, so it does not depend on the machine's speed or load.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from odradek.server import heap
from tests.clients.test_confluent_kafka import create_topic
from tests.conftest import BrokerProcess


def minor_faults(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[7])  # minflt: the 10th field of stat, the 8th after the name


def produce_megabytes(producer: Producer, topic: str, megabytes: int) -> None:
    value = b"v" * 1000
    for _ in range(megabytes * 1000):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0


def test_large_produce_requests_reuse_the_heap_instead_of_faulting_in_fresh_pages(
        broker: BrokerProcess, topic_name: str) -> None:
    assert broker.proc is not None
    create_topic(broker.bootstrap, topic_name)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "1",
                         "batch.size": 1_000_000, "linger.ms": 50,
                         "compression.type": "none"})
    produce_megabytes(producer, topic_name, 8)  # warm-up: the heap reaches its size
    before = minor_faults(broker.proc.pid)
    produce_megabytes(producer, topic_name, 32)
    per_mb = (minor_faults(broker.proc.pid) - before) / 32
    print(f"\n{per_mb:.1f} minor page faults per MB produced")
    # 570 per MB without the tuning (two fresh megabytes per 1 MB request)
    assert per_mb < 60, f"{per_mb:.0f} page faults per MB produced: the heap is not reused"


def test_thresholds_the_user_set_through_glibcs_environment_are_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    assert heap.keep_freed_memory() is False
