"""Debian's kcat 1.7.1 on librdkafka 2.0.2: an old client must keep working."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.clients.test_confluent_kafka import create_topic
from tests.conftest import BrokerProcess


def kcat(*args: str, stdin: str | None = None) -> str:
    result = subprocess.run(["kcat", *args], input=stdin, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_metadata_produce_and_consume(broker: BrokerProcess, topic_name: str,
                                      codec: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    meta = json.loads(kcat("-L", "-b", broker.bootstrap, "-J", "-t", topic_name))
    assert meta["topics"][0]["topic"] == topic_name
    assert len(meta["topics"][0]["partitions"]) == 2

    lines = "".join(f"key{i}:value{i}\n" for i in range(20))
    kcat("-P", "-b", broker.bootstrap, "-t", topic_name, "-K:", "-H", "source=kcat",
         "-z", codec, stdin=lines)
    out = kcat("-C", "-b", broker.bootstrap, "-t", topic_name, "-o", "beginning", "-e",
               "-f", "p=%p o=%o key=%k headers=%h value=%s\n")
    rows = [line for line in out.splitlines() if line.startswith("p=")]
    assert len(rows) == 20
    assert all("headers=source=kcat" in r for r in rows)
    assert {r.split("key=")[1].split(" ")[0] for r in rows} == {f"key{i}" for i in range(20)}
