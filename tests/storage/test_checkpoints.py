import base64
import json
from pathlib import Path

import pytest

from odradek.storage.checkpoints import (
    CheckpointError,
    MetaProperties,
    new_uuid,
    read_meta_properties,
    read_offsets,
    read_partition_metadata,
    uuid_from_str,
    uuid_to_str,
    write_meta_properties,
    write_offsets,
    write_partition_metadata,
)


def test_offset_checkpoint_text_is_kafkas(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offsets(path, {("orders", 1): 42, ("my.topic-x", 0): 7})
    assert path.read_text() == "0\n2\nmy.topic-x 0 7\norders 1 42\n"
    assert read_offsets(path) == {("orders", 1): 42, ("my.topic-x", 0): 7}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_empty_and_missing_checkpoints(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    assert read_offsets(path) == {}
    write_offsets(path, {})
    assert path.read_text() == "0\n0\n"
    assert read_offsets(path) == {}


def test_checkpoint_with_wrong_count_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cleaner-offset-checkpoint"
    path.write_text("0\n2\na 0 1\n")
    with pytest.raises(CheckpointError):
        read_offsets(path)


def test_meta_properties_v1(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    meta = MetaProperties(1, "MkU3OEVBNTcwNTJENDM2Qg", 3, "AAAAAAAAAAAAAAAAAAAAAQ")
    write_meta_properties(path, meta)
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    assert lines == [
        "cluster.id=MkU3OEVBNTcwNTJENDM2Qg",
        "directory.id=AAAAAAAAAAAAAAAAAAAAAQ",
        "node.id=3",
        "version=1",
    ]
    assert read_meta_properties(path) == MetaProperties(
        1, "MkU3OEVBNTcwNTJENDM2Qg", 3, "AAAAAAAAAAAAAAAAAAAAAQ"
    )


def test_meta_properties_v0_from_a_zookeeper_broker(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    path.write_text("#\n#Tue Nov 14 10:33:27 UTC 2023\nbroker.id=7\nversion=0\ncluster.id=abc\n")
    assert read_meta_properties(path) == MetaProperties(0, "abc", 7, None)


def test_partition_metadata_is_exactly_kafkas(tmp_path: Path) -> None:
    topic_id = uuid_to_str(bytes(range(16)))
    write_partition_metadata(tmp_path, topic_id)
    assert (tmp_path / "partition.metadata").read_bytes() == (
        b"version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw"
    )
    assert read_partition_metadata(tmp_path) == topic_id


def test_kafka_uuid_strings() -> None:
    raw = bytes.fromhex("fb0a1f3cd7e24bdcb1bb23d14d8d6d11")
    text = uuid_to_str(raw)
    assert text == base64.urlsafe_b64encode(raw).decode().rstrip("=")
    assert len(text) == 22
    assert uuid_from_str(text) == raw
    for _ in range(200):
        fresh = new_uuid()
        assert not fresh.startswith("-") and len(uuid_from_str(fresh)) == 16


def test_clean_shutdown_marker_is_kafka_json(tmp_path: Path) -> None:
    from odradek.storage.manager import LogManager

    manager = LogManager([tmp_path / "d"], node_id=1, cluster_id="c")
    manager.startup()
    manager.shutdown(broker_epoch=12)
    marker = json.loads((tmp_path / "d" / ".kafka_cleanshutdown").read_text())
    assert marker == {"version": "0", "broker_epoch": "12"}


def test_new_partitions_synced_without_descriptors_wait_and_their_dir_stays_online(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from odradek.storage import dir_checkpoints

    new = tmp_path / "t-0"
    new.mkdir()
    failed: list[Path] = []

    def out_of_descriptors(path: Path) -> None:
        raise OSError(errno.EMFILE, "Too many open files", str(path))

    monkeypatch.setattr(dir_checkpoints, "fsync_dir", out_of_descriptors)
    retry, exhausted = dir_checkpoints.sync_new([new], set(),
                                                lambda d, e: failed.append(d))
    # running out of descriptors is not a failed disk: the dir is not failed, and the
    # partition is synced on the next pass
    assert failed == [] and retry == {new} and exhausted is not None
    monkeypatch.undo()
    assert dir_checkpoints.sync_new(retry, set(), lambda d, e: failed.append(d)) == (set(), None)
    assert failed == []
