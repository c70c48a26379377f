"""aiokafka 0.14 (ApiVersions v0, Metadata v5, Produce v7, Fetch v11) against a real broker."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.conftest import BrokerProcess


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_produce_consume(broker: BrokerProcess, topic_name: str, codec: str | None) -> None:
    async def run() -> list[tuple[bytes | None, bytes | None]]:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        await admin.create_topics([NewTopic(topic_name, 3, 1)])
        await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap,
                                    compression_type=codec, enable_idempotence=True)
        await producer.start()
        for i in range(100):
            await producer.send(topic_name, key=b"k%d" % (i % 5),
                                value=None if i == 7 else b"v%d" % i,
                                headers=[("h", b"1")])
        await producer.flush()
        await producer.stop()
        consumer = AIOKafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        out = []
        try:
            while len(out) < 100:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 10)
                for msgs in batch.values():
                    out.extend((m.key, m.value) for m in msgs)
        finally:
            await consumer.stop()
        return out

    got = asyncio.run(run())
    assert len(got) == 100
    assert (b"k2", None) in got
    assert sum(1 for _, v in got if v is not None) == 99
