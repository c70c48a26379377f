"""A broker with three log dirs: spreading partitions, a full disk, a failed disk, moves.

Failing a disk for real needs root: a small tmpfs filled to the brim (ENOSPC on every
write), and an ext4 image on a loop device shut down with EXT4_IOC_SHUTDOWN (EIO on
every read, write and fsync — what a dead disk looks like). `chmod` would not stop
root, and remounting read-only fails while the broker holds files open for writing.
Without root or mount these tests skip.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.clients.test_confluent_kafka import create_topic
from tests.conftest import BrokerProcess
from tests.lifecycle.test_broker_retention import FAST, wait_for
from tests.wire import WireClient

EXT4_IOC_SHUTDOWN = 0x8004587D  # _IOR('X', 125, __u32)
EXT4_GOING_FLAGS_NOLOGFLUSH = 2


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def _can_mount(tmp: Path) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    probe = tmp / "probe"
    probe.mkdir()
    ok = _run("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)).returncode == 0
    if ok:
        _run("umount", str(probe))
    return ok


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    if _run("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield path
    finally:
        _run("umount", "-l", str(path))


@contextlib.contextmanager
def ext4_image(path: Path, image: Path, size_mb: int = 64) -> Iterator[Path]:
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("no mkfs.ext4")
    with open(image, "wb") as f:
        f.truncate(size_mb * 1024 * 1024)
    if _run("mkfs.ext4", "-q", "-F", str(image)).returncode:
        pytest.skip("mkfs.ext4 failed")
    path.mkdir(parents=True, exist_ok=True)
    if _run("mount", "-o", "loop", str(image), str(path)).returncode:
        pytest.skip("cannot mount a loop device here")
    try:
        yield path
    finally:
        _run("umount", "-l", str(path))


def shut_down_ext4(path: Path) -> None:
    """The filesystem dies: every operation on it fails with EIO from now on."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", EXT4_GOING_FLAGS_NOLOGFLUSH))
    finally:
        os.close(fd)


def fill(path: Path) -> None:
    """Use up every free byte of the filesystem holding `path`."""
    with open(path / "filler", "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
            f.flush()


@pytest.fixture
def root_mounts(tmp_path: Path) -> Path:
    if not _can_mount(tmp_path):
        pytest.skip("needs root and mount to fail a disk")
    return tmp_path


def describe_log_dirs(bootstrap: str) -> dict[str, Any]:
    with WireClient(bootstrap) as client:
        response = client.call(35, 4, topics=None)
    return {r.log_dir: r for r in response.results}


def dir_partitions(result: Any) -> set[tuple[str, int]]:
    return {(t.name, p.partition_index) for t in result.topics for p in t.partitions
            if not p.is_future_key}


def start_broker(dirs: list[Path], data: Path, **overrides: str) -> BrokerProcess:
    b = BrokerProcess(data, overrides={**FAST, "log.dirs": ",".join(str(d) for d in dirs),
                                       **overrides})
    return b.start()


def files_held_under(broker: BrokerProcess, directory: Path) -> list[str]:
    """The files under `directory` the broker process holds open (from /proc)."""
    assert broker.proc is not None
    fds = Path(f"/proc/{broker.proc.pid}/fd")
    held = []
    for fd in fds.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed while listed
        if target.startswith(str(directory) + "/"):
            held.append(target)
    return held


def produce_each(bootstrap: str, topic: str, partitions: int, tag: bytes,
                 timeout_ms: int = 4000) -> dict[int, list[bytes]]:
    """One record per partition, bigger than a page (a full tmpfs still takes writes into
    a file's last page); returns what was acknowledged, by partition."""
    acked: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    failed: dict[int, KafkaError] = {}

    def done(err: KafkaError | None, msg: Any) -> None:
        if err is None:
            acked[msg.partition()].append(msg.value())
        else:
            failed[msg.partition()] = err

    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": timeout_ms,
                  "linger.ms": 0})
    for part in range(partitions):
        p.produce(topic, value=tag + b"-%d" % part, key=b"k" * 8192, partition=part,
                  on_delivery=done)
    p.flush(timeout_ms / 1000 + 5)
    return acked


def consume(bootstrap: str, topic: str, partition: int, expected: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dirs-reader",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    out: list[bytes] = []
    deadline = time.monotonic() + 15
    while len(out) < expected and time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is not None and msg.error() is None:
            out.append(msg.value())
    c.close()
    return out


def where(dirs: list[Path], topic: str) -> dict[int, Path]:
    out = {}
    for d in dirs:
        for entry in d.iterdir():
            if (entry.is_dir() and entry.name.startswith(topic + "-")
                    and entry.name[len(topic) + 1:].isdigit()):
                out[int(entry.name.rsplit("-", 1)[1])] = d
    return out


def test_a_full_disk_takes_its_partitions_offline_and_the_others_carry_on(
    root_mounts: Path, topic_name: str
) -> None:
    a, c = root_mounts / "a", root_mounts / "c"
    with tmpfs(root_mounts / "b", "2m") as b:
        dirs = [a, b, c]
        broker = start_broker(dirs, a)
        try:
            create_topic(broker.bootstrap, topic_name, partitions=6)
            placed = where(dirs, topic_name)
            assert sorted(list(placed.values()).count(d) for d in dirs) == [2, 2, 2]
            before = produce_each(broker.bootstrap, topic_name, 6, b"before")
            assert all(len(v) == 1 for v in before.values())
            fill(b)
            after = produce_each(broker.bootstrap, topic_name, 6, b"after")
            on_b = [p for p, d in placed.items() if d == b]
            assert all(after[p] == [] for p in on_b), "writes to the full disk fail"
            assert all(after[p] == [b"after-%d" % p] for p in placed if p not in on_b)
            usage = describe_log_dirs(broker.bootstrap)
            assert usage[str(b)].error_code == 56  # KAFKA_STORAGE_ERROR
            assert files_held_under(broker, b) == [], "an offline dir's files are closed"
            assert usage[str(a)].error_code == 0 and usage[str(c)].error_code == 0
            assert dir_partitions(usage[str(a)]) | dir_partitions(usage[str(c)]) >= {
                (topic_name, p) for p in placed if p not in on_b
            }
            assert broker.alive()
            # A new topic goes to the dirs that work.
            create_topic(broker.bootstrap, topic_name + "-new", partitions=4)
            assert b not in where(dirs, topic_name + "-new").values()
        finally:
            broker.stop()
        # Space freed, broker restarted: nothing acknowledged was lost.
        (b / "filler").unlink()
        broker = start_broker(dirs, a)
        try:
            for p in range(6):
                want = before[p] + ([] if placed[p] == b else after[p])
                assert consume(broker.bootstrap, topic_name, p, len(want)) == want
        finally:
            broker.stop()


def test_a_dead_disk_takes_only_its_partitions_offline(root_mounts: Path,
                                                        topic_name: str) -> None:
    a, c = root_mounts / "a", root_mounts / "c"
    with ext4_image(root_mounts / "b", root_mounts / "b.img") as b:
        dirs = [a, b, c]
        broker = start_broker(dirs, a)
        try:
            create_topic(broker.bootstrap, topic_name, partitions=3)
            placed = where(dirs, topic_name)
            before = produce_each(broker.bootstrap, topic_name, 3, b"before")
            assert all(len(v) == 1 for v in before.values())
            shut_down_ext4(b)
            after = produce_each(broker.bootstrap, topic_name, 3, b"after")
            (dead,) = [p for p, d in placed.items() if d == b]
            assert after[dead] == []
            for p in placed:
                if p != dead:
                    assert after[p] == [b"after-%d" % p]
                    assert consume(broker.bootstrap, topic_name, p, 2) == [
                        b"before-%d" % p, b"after-%d" % p]
            usage = describe_log_dirs(broker.bootstrap)
            assert usage[str(b)].error_code == 56
            assert usage[str(b)].total_bytes == -1
            assert files_held_under(broker, b) == [], "an offline dir's files are closed"
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            parts = admin.list_topics(topic_name, timeout=10).topics[topic_name].partitions
            assert parts[dead].leader == -1, "clients see the partition offline"
            assert all(parts[p].leader == 1 for p in placed if p != dead)
            assert broker.alive()
        finally:
            broker.stop()
        assert "offline" in broker.logs()


def test_alter_replica_log_dirs_moves_a_partition_while_it_serves(
    tmp_path: Path, topic_name: str
) -> None:
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    broker = start_broker(dirs, dirs[0], **{"log.segment.bytes": "5000"})
    try:
        create_topic(broker.bootstrap, topic_name, partitions=1)
        (source,) = where(dirs, topic_name).values()
        target = next(d for d in dirs if d != source)
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1,
                      "batch.size": 2000})
        for i in range(300):
            p.produce(topic_name, value=b"before-%04d" % i)
        assert p.flush(10) == 0
        with WireClient(broker.bootstrap) as client:
            schema = client.schema(34, 2)
            response = client.call(34, 2, dirs=(schema.AlterReplicaLogDir(
                path=str(target), topics=(schema.AlterReplicaLogDirTopic(
                    name=topic_name, partitions=(0,)),)),))
        assert response.results[0].partitions[0].error_code == 0
        for i in range(300):
            p.produce(topic_name, value=b"during-%04d" % i)
        assert p.flush(10) == 0
        wait_for(lambda: (topic_name, 0) in dir_partitions(
            describe_log_dirs(broker.bootstrap)[str(target)]), what="the move")
        assert where(dirs, topic_name) == {0: target}
        for i in range(100):
            p.produce(topic_name, value=b"after-%04d" % i)
        assert p.flush(10) == 0
        got = consume(broker.bootstrap, topic_name, 0, 700)
        assert got == ([b"before-%04d" % i for i in range(300)]
                       + [b"during-%04d" % i for i in range(300)]
                       + [b"after-%04d" % i for i in range(100)])
        # Unknown dirs and partitions get Kafka's errors.
        with WireClient(broker.bootstrap) as client:
            schema = client.schema(34, 2)
            bad = client.call(34, 2, dirs=(schema.AlterReplicaLogDir(
                path="/nowhere", topics=(schema.AlterReplicaLogDirTopic(
                    name=topic_name, partitions=(0,)),)),))
        assert bad.results[0].partitions[0].error_code == 57  # LOG_DIR_NOT_FOUND
    finally:
        broker.stop()
    broker.start()  # and it is found in its new dir after a restart
    try:
        assert len(consume(broker.bootstrap, topic_name, 0, 700)) == 700
    finally:
        broker.stop()
