"""KafkaJS 2.2.4 (Node.js): a client with its own protocol code, older API versions and
no librdkafka underneath. Node and the npm packages are installed by `make test`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.clients.test_confluent_kafka import consume_all
from tests.conftest import BrokerProcess

DRIVER_DIR = Path(__file__).parent / "kafkajs"


def kafkajs(scenario: str, bootstrap: str, topic: str, *args: str,
            security: dict[str, Any] | None = None) -> Any:
    """Run a drive.js scenario; `security`: its ssl and sasl options (drive.js says how)."""
    if shutil.which("node") is None or not (DRIVER_DIR / "node_modules" / "kafkajs").exists():
        pytest.fail("node and tests/clients/kafkajs/node_modules are missing: run `make test`")
    env = dict(os.environ, ODRADEK_KAFKAJS_SECURITY=json.dumps(security or {}))
    result = subprocess.run(["node", "drive.js", scenario, bootstrap, topic, *args],
                            cwd=DRIVER_DIR, capture_output=True, text=True, timeout=120,
                            env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
def test_produce_then_consume_in_a_group(broker: BrokerProcess, topic_name: str,
                                         codec: str) -> None:
    out = kafkajs("produce", broker.bootstrap, topic_name, codec)
    assert out["partitions"] == 3
    assert all(a["error"] == 0 for a in out["acks"])
    got = out["got"]
    assert sorted(m["value"] for m in got) == sorted(f"v{i}" for i in range(30))
    assert all(m["key"] == "k" + m["value"][1:] for m in got)
    assert all(m["headers"] == {"source": "kafkajs"} for m in got)
    # offsets are dense per partition and the group committed past the last one
    per_partition: dict[int, list[int]] = {}
    for m in got:
        per_partition.setdefault(m["partition"], []).append(int(m["offset"]))
    for offsets in per_partition.values():
        assert sorted(offsets) == list(range(len(offsets)))
    committed = {int(p["partition"]): int(p["offset"]) for p in out["committed"]}
    assert all(committed[p] == len(o) for p, o in per_partition.items())

    # what KafkaJS compressed, librdkafka reads back the same
    values = sorted(m.value().decode() for m in consume_all(broker.bootstrap, topic_name, 30))
    assert values == sorted(f"v{i}" for i in range(30))


def test_transactions_commit_and_abort(broker: BrokerProcess, topic_name: str) -> None:
    out = kafkajs("transactions", broker.bootstrap, topic_name)
    assert out["values"] == ["kept-1", "kept-2", "kept-3"]
    # a read_uncommitted reader sees the aborted record too: it was written, then aborted
    seen = [m.value().decode() for m in consume_all(
        broker.bootstrap, topic_name, 4, **{"isolation.level": "read_uncommitted"})]
    assert seen == ["kept-1", "kept-2", "dropped", "kept-3"]
