"""Small helpers the pipeline tests share: topics, producing, and broker capability probes."""

from __future__ import annotations

import functools
import tempfile
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.conftest import BrokerProcess
from tests.wire import WireClient

OFFSET_COMMIT = 8
DELETE_RECORDS = 21
END_TXN = 26


def topic(prefix: str = "p") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int = 2,
                 config: dict[str, str] | None = None) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1, config=config or {})],
                                      request_timeout=30).values():
        future.result(30)
    return name


def add_partitions(bootstrap: str, name: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_partitions([NewPartitions(name, total)]).values():
        future.result(30)


def produce(bootstrap: str, name: str, records: Iterable[dict[str, Any]],
            **conf: Any) -> int:
    """Send records given as dicts of produce() arguments; return how many were acked."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    acked = []
    for rec in records:
        producer.produce(name, on_delivery=lambda err, msg: acked.append(err is None), **rec)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert all(acked)
    return len(acked)


def produce_values(bootstrap: str, name: str, values: Iterable[bytes | str],
                   partition: int | None = None) -> int:
    recs = []
    for i, v in enumerate(values):
        rec: dict[str, Any] = {"value": v.encode() if isinstance(v, str) else v,
                               "key": f"k{i}".encode()}
        if partition is not None:
            rec["partition"] = partition
        recs.append(rec)
    return produce(bootstrap, name, recs)


@functools.cache
def supported_apis() -> frozenset[int]:
    """The API keys an odradek broker advertises in ApiVersions (probed once per run)."""
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "data").start()
        try:
            with WireClient(broker.bootstrap) as client:
                response = client.call(18, 0)
            return frozenset(int(k.api_key) for k in response.api_keys)
        finally:
            broker.stop()


def broker_supports(api_key: int) -> bool:
    return api_key in supported_apis()
