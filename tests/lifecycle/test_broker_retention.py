"""Retention and DeleteRecords against a real broker, with real clients."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import pytest
import typer
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from typer.testing import CliRunner

from odradek.cli.delete_records import delete_records
from tests.clients.test_confluent_kafka import consume_all, create_topic
from tests.conftest import BrokerProcess

FAST = {
    "log.retention.check.interval.ms": "200",
    "log.segment.delete.delay.ms": "0",
    "log.cleaner.backoff.ms": "100",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    b = BrokerProcess(tmp_path_factory.mktemp("lifecycle") / "data", overrides=dict(FAST))
    b.start()
    yield b
    b.stop()


def earliest(bootstrap: str, topic: str, partition: int = 0) -> int:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "earliest-probe"})
    low, _high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    c.close()
    return int(low)


def wait_for(predicate, timeout: float = 20.0, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def segment_files(broker: BrokerProcess, topic: str, partition: int = 0) -> list[Path]:
    return sorted((broker.data_dir / f"{topic}-{partition}").glob("*.log"))


def segment_bytes(directory: Path) -> int:
    """Bytes in the .log files; the broker may delete one between listing and stat."""
    total = 0
    for f in directory.glob("*.log"):
        with contextlib.suppress(FileNotFoundError):
            total += f.stat().st_size
    return total


def produce(bootstrap: str, topic: str, values: list[bytes], timestamp: int | None = None,
            key: bytes | None = None) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for v in values:
        if timestamp is None:
            p.produce(topic, value=v, key=key)
        else:
            p.produce(topic, value=v, key=key, timestamp=timestamp)
        p.poll(0)
    assert p.flush(15) == 0


def set_topic_config(bootstrap: str, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ops = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
           for k, v in configs.items()]
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=ops)
    admin.incremental_alter_configs([res])[res].result(10)


def test_retention_ms_changed_live_drops_old_segments_and_nothing_newer(
    broker: BrokerProcess, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, **{"segment.bytes": "2000"})
    hour_ago = int(time.time() * 1000) - 3_600_000
    old = [b"old-%03d" % i for i in range(60)]
    new = [b"new-%03d" % i for i in range(60)]
    produce(broker.bootstrap, topic_name, old, timestamp=hour_ago)
    produce(broker.bootstrap, topic_name, new)
    files_before = len(segment_files(broker, topic_name))
    assert files_before > 4 and earliest(broker.bootstrap, topic_name) == 0
    # The default (3 days) keeps everything; 30 minutes, set live, does not.
    set_topic_config(broker.bootstrap, topic_name, **{"retention.ms": "1800000"})
    wait_for(lambda: earliest(broker.bootstrap, topic_name) > 0, what="retention")
    low = earliest(broker.bootstrap, topic_name)
    assert 0 < low <= 60
    got = [m.value() for m in consume_all(broker.bootstrap, topic_name, 120 - low, timeout=15)]
    assert got[-60:] == new, "every newer record is still there"
    assert all(v.startswith(b"old-") for v in got[:-60])
    wait_for(lambda: len(segment_files(broker, topic_name)) < files_before, what="file removal")
    assert not list((broker.data_dir / f"{topic_name}-0").glob("*.deleted"))


def test_retention_bytes_keeps_the_partition_under_its_bound(
    broker: BrokerProcess, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name,
                 **{"segment.bytes": "4000", "retention.bytes": "20000"})
    produce(broker.bootstrap, topic_name, [b"x" * 200 + b"%04d" % i for i in range(400)])

    def size() -> int:
        return segment_bytes(broker.data_dir / f"{topic_name}-0")

    wait_for(lambda: size() <= 20000 + 4000, what="retention.bytes")
    assert earliest(broker.bootstrap, topic_name) > 0
    got = consume_all(broker.bootstrap, topic_name, 400 - earliest(broker.bootstrap, topic_name))
    assert got[-1].value().endswith(b"0399")


def test_delete_records_moves_earliest(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2, **{"segment.bytes": "1000"})
    produce(broker.bootstrap, topic_name, [b"r%03d" % i for i in range(100)], key=b"one-key")
    (partition,) = [p for p in (0, 1) if _high(broker.bootstrap, topic_name, p) == 100]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    result = admin.delete_records([TopicPartition(topic_name, partition, 40)])
    (future,) = result.values()
    assert future.result(10).low_watermark == 40
    assert earliest(broker.bootstrap, topic_name, partition) == 40
    # The segments wholly below 40 are gone from disk.
    assert all(int(f.stem) <= 40 for f in segment_files(broker, topic_name, partition)[:1])
    # Above the high watermark: OFFSET_OUT_OF_RANGE.
    (bad,) = admin.delete_records([TopicPartition(topic_name, partition, 1000)]).values()
    with pytest.raises(KafkaException, match=r"OFFSET_OUT_OF_RANGE|out of range"):
        bad.result(10)
    # -1: everything up to the high watermark.
    (all_,) = admin.delete_records([TopicPartition(topic_name, partition, -1)]).values()
    assert all_.result(10).low_watermark == 100
    assert earliest(broker.bootstrap, topic_name, partition) == 100


def _high(bootstrap: str, topic: str, partition: int) -> int:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    _low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    c.close()
    return int(high)


def test_delete_records_cli_takes_kafkas_json_and_a_topic(
    broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, topic_name)
    produce(broker.bootstrap, topic_name, [b"%d" % i for i in range(30)])
    app = typer.Typer()
    app.command()(delete_records)
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"partitions": [{"topic": topic_name, "partition": 0,
                                                "offset": 10}], "version": 1}))
    runner = CliRunner()
    out = runner.invoke(app, ["--bootstrap-server", broker.bootstrap,
                              "--offset-json-file", str(spec)])
    assert out.exit_code == 0, out.output
    assert f"partition: {topic_name}-0\tlow_watermark: 10" in out.output
    out = runner.invoke(app, ["-b", broker.bootstrap, "--topic", topic_name, "--offset", "20"])
    assert out.exit_code == 0, out.output
    assert earliest(broker.bootstrap, topic_name) == 20
    out = runner.invoke(app, ["-b", broker.bootstrap, "--topic", topic_name, "--offset", "999"])
    assert out.exit_code == 1 and "error" in out.output


def test_delete_records_on_a_compacted_topic_is_a_policy_violation(
    broker: BrokerProcess, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, **{"cleanup.policy": "compact"})
    produce(broker.bootstrap, topic_name, [b"v"], key=b"k")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (future,) = admin.delete_records([TopicPartition(topic_name, 0, 1)]).values()
    with pytest.raises(KafkaException, match=r"POLICY_VIOLATION|policy"):
        future.result(10)


def test_negative_or_non_numeric_retention_is_refused(broker: BrokerProcess,
                                                      topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    for name, value in (("retention.ms", "-5"), ("retention.bytes", "-2"),
                        ("retention.ms", "soon"), ("delete.retention.ms", "-1"),
                        ("min.cleanable.dirty.ratio", "1.5")):
        with pytest.raises(KafkaException, match=r"INVALID_CONFIG|Invalid value"):
            set_topic_config(broker.bootstrap, topic_name, **{name: value})
    # retention.ms below segment.ms is fine, and -1 means forever.
    set_topic_config(broker.bootstrap, topic_name,
                     **{"retention.ms": "1000", "segment.ms": "60000"})
    set_topic_config(broker.bootstrap, topic_name, **{"retention.ms": "-1"})
