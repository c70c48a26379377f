"""Damaged checkpoint, epoch, metadata and snapshot files: the broker warns, names the
file and what it reset, starts from safe values as Kafka's LogManager does, and loses
no acknowledged record.

The readers are tried with any bytes (hypothesis); each file is then damaged under a
real broker, which must start and serve every record acknowledged before the damage.
"""

from __future__ import annotations

import contextlib
import logging
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import make_batch

from odradek.storage.checkpoints import (
    CheckpointError,
    read_offsets,
    read_offsets_or_reset,
    read_or_repair_partition_metadata,
    read_partition_metadata,
)
from odradek.storage.epochs import LeaderEpochFileCache
from odradek.storage.log import Log
from odradek.storage.producer_state import CorruptSnapshot, read_snapshot
from tests.clients.test_confluent_kafka import consume_all, create_topic
from tests.conftest import BrokerProcess

# Checkpoint-shaped text as well as raw bytes: most damage keeps the shape.
_LINE = st.one_of(
    st.integers(-3, 3).map(str),
    st.tuples(st.text("ab-_.x", max_size=4), st.integers(-2, 5), st.integers(-(2**70), 2**70))
    .map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
    st.tuples(st.integers(-2, 5), st.integers(-5, 10)).map(lambda t: f"{t[0]} {t[1]}"),
    st.text(max_size=12),
)
ANY_FILE = st.one_of(
    st.binary(max_size=200),
    st.lists(_LINE, max_size=6).map(lambda ls: "\n".join(ls).encode("utf-8", "surrogatepass")),
)
_SETTINGS = settings(max_examples=300, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(data=ANY_FILE)
def test_offset_checkpoint_of_any_bytes_is_read_or_reset(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_bytes(data)
    try:
        parsed = read_offsets(path)
    except CheckpointError:
        parsed = {}
    assert read_offsets_or_reset(path, "reset") == parsed


@_SETTINGS
@given(data=ANY_FILE)
def test_epoch_checkpoint_of_any_bytes_is_read_or_marked_damaged(tmp_path: Path,
                                                                 data: bytes) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(data)
    cache = LeaderEpochFileCache(path, sync=False)
    entries = cache.entries
    assert (cache.damaged is None) or entries == []
    epochs = [e.epoch for e in entries]
    starts = [e.start_offset for e in entries]
    assert epochs == sorted(set(epochs)) and starts == sorted(starts)
    assert all(e >= 0 for e in epochs + starts)


@_SETTINGS
@given(data=ANY_FILE)
def test_partition_metadata_of_any_bytes_is_read_or_repaired(tmp_path: Path,
                                                            data: bytes) -> None:
    (tmp_path / "partition.metadata").write_bytes(data)
    try:
        read_partition_metadata(tmp_path)
    except CheckpointError:
        assert read_or_repair_partition_metadata(tmp_path, None) is None
        topic_id = "AAAAAAAAAAAAAAAAAAAAAQ"
        assert read_or_repair_partition_metadata(tmp_path, topic_id) == topic_id
        assert read_partition_metadata(tmp_path) == topic_id


@_SETTINGS
@given(data=st.binary(max_size=200))
def test_producer_snapshot_of_any_bytes_is_read_or_refused(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "00000000000000000000.snapshot"
    path.write_bytes(data)
    with contextlib.suppress(CorruptSnapshot):  # anything else would stop the broker
        read_snapshot(path)


def test_damaged_epoch_file_is_rebuilt_from_the_batches(
        open_log: Callable[..., Log], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lg = open_log()
    for epoch in (0, 0, 3, 3, 7):
        lg.append_as_leader(make_batch([b"v"]), leader_epoch=epoch)
    before = lg.leader_epochs.entries
    assert [e.epoch for e in before] == [0, 3, 7]
    lg.close()
    (tmp_path / "topic-0" / "leader-epoch-checkpoint").write_bytes(b"\xff\xfe\x00garbage")
    with caplog.at_level(logging.WARNING):
        again = open_log()
    assert again.leader_epochs.entries == before
    assert "leader-epoch-checkpoint" in caplog.text and "rebuilt" in caplog.text


# ------------------------------------------------------------------ real broker

def _garbage(path: Path) -> None:
    path.write_bytes(b"\x00\xff\xfe\x80garbage\x9c" * 7)


def _truncated(path: Path) -> None:
    data = path.read_bytes() if path.exists() else b"0\n2\nx 0 1\n"
    path.write_bytes(data[: max(1, len(data) // 2 - 1)])


def _wrong_version(path: Path) -> None:
    path.write_bytes(b"7\n1\nx 0 12\n")


def _wrong_count(path: Path) -> None:
    path.write_bytes(b"0\n5\nx 0 12\n")


def _snapshot_wrong_version(path: Path) -> None:
    path.write_bytes(struct.pack(">hI i", 9, 0, 0))


# (file name, where it lives, damage, stop with SIGKILL so recovery matters)
CASES = [
    ("recovery-point-offset-checkpoint", "dir", _garbage, True),
    ("log-start-offset-checkpoint", "dir", _wrong_count, False),
    ("replication-offset-checkpoint", "dir", _truncated, False),
    ("cleaner-offset-checkpoint", "dir", _garbage, False),
    ("leader-epoch-checkpoint", "partition", _garbage, False),
    ("partition.metadata", "partition", _wrong_version, False),
    ("*.snapshot", "partition", _snapshot_wrong_version, True),  # the newest one
]


def _targets(data: Path, topic: str, name: str, where: str) -> list[Path]:
    parts = [data / f"{topic}-{part}" for part in (0, 1)]
    if where == "dir":
        return [data / name]
    if name.startswith("*"):
        return [max(d.glob(name)) for d in parts]
    return [d / name for d in parts]


def _damage_and_restart(broker: BrokerProcess, topic: str,
                        cases: list[tuple[str, str, Callable[[Path], None], bool]]) -> None:
    """Acknowledged records, the broker stopped (SIGKILL if a case asks), the files
    damaged, the broker restarted: every record is there once, each damaged file is
    named in the log, and the partitions take writes again."""
    broker.overrides = {"log.segment.bytes": "20000",  # several segments each
                        "offsets.topic.num.partitions": "1"}
    broker.start()
    create_topic(broker.bootstrap, topic, partitions=2, **{"cleanup.policy": "compact,delete"})
    acked: list[bytes] = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                  "enable.idempotence": True, "linger.ms": 2, "batch.size": 8000})
    for i in range(1500):
        p.produce(topic, key=b"k%d" % i, value=b"rec-%06d" % i + bytes(60),
                  on_delivery=lambda err, msg: acked.append(msg.value() if err is None else err))
    assert p.flush(20) == 0
    assert len(acked) == 1500 and all(isinstance(v, bytes) for v in acked), acked[:3]
    broker.kill() if any(kill for *_, kill in cases) else broker.stop()

    named = []
    for name, where, damage, _ in cases:
        targets = _targets(broker.data_dir, topic, name, where)
        for target in targets:
            damage(target)
        named.append(targets[0])
    broker.start()

    got = consume_all(broker.bootstrap, topic, len(acked), timeout=30)
    values = [m.value() for m in got]
    assert sorted(values) == sorted(acked), "every acknowledged record, once"
    log_text = broker.log_path.read_text(errors="replace")
    for target in named:
        assert str(target) in log_text, f"{target} is named in the log"
    assert "damaged" in log_text
    # and the partitions take writes again, from the same idempotent producer too
    p.produce(topic, key=b"after", value=b"after-the-damage")
    assert p.flush(20) == 0
    again = consume_all(broker.bootstrap, topic, len(acked) + 1, timeout=30)
    assert b"after-the-damage" in {m.value() for m in again}


def test_broker_starts_with_every_file_damaged_and_serves_every_acknowledged_record(
        fresh_broker: BrokerProcess, topic_name: str) -> None:
    _damage_and_restart(fresh_broker, topic_name, CASES)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "where", "damage", "kill"), CASES,
                         ids=[c[0].strip("*.") for c in CASES])
def test_broker_starts_after_damage_and_serves_every_acknowledged_record(
        fresh_broker: BrokerProcess, topic_name: str, name: str, where: str,
        damage: Callable[[Path], None], kill: bool) -> None:
    _damage_and_restart(fresh_broker, topic_name, [(name, where, damage, kill)])
