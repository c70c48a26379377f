"""Kafka's small text files: checkpoints, `meta.properties`, `partition.metadata`.

At the root of each log dir (one line per partition, `<topic> <partition> <offset>`):
    recovery-point-offset-checkpoint, replication-offset-checkpoint,
    log-start-offset-checkpoint, cleaner-offset-checkpoint
all in Kafka's checkpoint format "<version>\\n<count>\\n<entry>\\n…", written atomically
(temporary file, fsync, rename, fsync of the directory) so a crash leaves the old file
or the new one, never half of either.

`meta.properties` is a Java properties file (version 1: node.id, cluster.id,
directory.id; version 0, from ZooKeeper-mode brokers: broker.id). `partition.metadata`
in each partition dir is "version: 0\\ntopic_id: <uuid>", the uuid in Kafka's string
form: URL-safe base64 of the 16 bytes without padding.
"""

from __future__ import annotations

import base64
import logging
import os
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from odradek.storage.file_handles import read_small_file

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
META_PROPERTIES = "meta.properties"
PARTITION_METADATA = "partition.metadata"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
CHECKPOINT_VERSION = 0

TopicPartition = tuple[str, int]

log = logging.getLogger(__name__)

_ZERO_UUID = bytes(16)
_METADATA_TOPIC_UUID = bytes(15) + b"\x01"


class CheckpointError(Exception):
    """A checkpoint or metadata file that cannot be parsed."""


# ------------------------------------------------------------------ atomic writes


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(path: Path, data: bytes, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes, *, sync: bool = True) -> None:
    tmp = path.with_name(path.name + ".tmp")
    _write_file(tmp, data, sync)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def write_new_file(path: Path, data: bytes, *, sync: bool = True) -> None:
    """A file written in place, without the temporary file and rename: only for a
    file that did not exist, in a directory just made (a new partition's metadata and
    epoch files). A crash can leave it torn; its reader repairs or rebuilds it, as it
    does a damaged one."""
    _write_file(path, data, sync)
    if sync:
        fsync_dir(path.parent)


# ------------------------------------------------------------------ checkpoint files


def format_checkpoint(lines: Iterable[str], version: int = CHECKPOINT_VERSION) -> str:
    body = list(lines)
    return "".join(f"{line}\n" for line in [str(version), str(len(body)), *body])


def parse_checkpoint(text: str, path: Path | str = "checkpoint") -> tuple[int, list[list[str]]]:
    """(version, entries split on whitespace); checks the count like Kafka's reader."""
    lines = text.splitlines()
    try:
        version = int(lines[0].strip())
        count = int(lines[1].strip())
    except (IndexError, ValueError):
        raise CheckpointError(f"malformed header in checkpoint file {path}") from None
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise CheckpointError(f"expected {count} entries in {path} but found {len(entries)}")
    return version, entries


def write_offsets(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    """An offset checkpoint (`<topic> <partition> <offset>` per line)."""
    lines = (f"{t} {p} {o}" for (t, p), o in sorted(offsets.items()))
    write_atomically(path, format_checkpoint(lines).encode())


def read_text(path: Path) -> str:
    """A checkpoint's text; bytes that are not UTF-8 make it malformed, not a crash."""
    try:
        return read_small_file(path).decode()
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"not text: {exc.reason} at byte {exc.start}") from None


def read_offsets(path: Path) -> dict[TopicPartition, int]:
    """An offset checkpoint's entries; an absent file is empty."""
    try:
        text = read_text(path)
    except FileNotFoundError:
        return {}
    version, entries = parse_checkpoint(text, path)
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(f"unknown version {version} of {path}")
    result: dict[TopicPartition, int] = {}
    for fields in entries:
        if len(fields) != 3:
            raise CheckpointError(f"malformed line in {path}: {' '.join(fields)}")
        try:
            result[(fields[0], int(fields[1]))] = int(fields[2])
        except ValueError:
            raise CheckpointError(f"malformed line in {path}: {' '.join(fields)}") from None
    return result


def read_offsets_or_reset(path: Path, reset: str) -> dict[TopicPartition, int]:
    """An offset checkpoint, or none at all if it is malformed: Kafka's LogManager
    warns and starts from safe values (`reset` says which) rather than refusing to
    start. An I/O error still propagates: that is a failing disk, not a bad file."""
    try:
        return read_offsets(path)
    except CheckpointError as exc:
        log.warning("ignoring the damaged checkpoint %s (%s): %s", path, exc, reset)
        return {}


# ------------------------------------------------------------------ Kafka Uuid


def uuid_to_str(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def uuid_from_str(text: str) -> bytes:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"{text!r} is not a 16-byte Kafka Uuid")
    return raw


def new_uuid() -> str:
    """A random Kafka Uuid string, avoiding what Kafka's Uuid.randomUuid avoids:
    the reserved zero and metadata-topic ids, and strings starting with '-'."""
    while True:
        raw = uuid.uuid4().bytes
        text = uuid_to_str(raw)
        if raw not in (_ZERO_UUID, _METADATA_TOPIC_UUID) and not text.startswith("-"):
            return text


# ------------------------------------------------------------------ meta.properties


@dataclass(frozen=True, slots=True)
class MetaProperties:
    version: int
    cluster_id: str | None
    node_id: int | None
    directory_id: str | None = None

    def to_properties(self) -> dict[str, str]:
        props = {"version": str(self.version)}
        if self.cluster_id is not None:
            props["cluster.id"] = self.cluster_id
        if self.node_id is not None:
            props["node.id" if self.version >= 1 else "broker.id"] = str(self.node_id)
        if self.directory_id is not None:
            props["directory.id"] = self.directory_id
        return props


def parse_properties(text: str) -> dict[str, str]:
    """Java properties, the subset Kafka writes: `key=value`, # and ! comments."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            key, value = line, ""
        else:
            key, value = line[:cut], line[cut + 1 :]
        props[key.strip()] = value.strip()
    return props


def format_properties(props: Mapping[str, str], now: float | None = None) -> str:
    # Java's Properties.store writes a comment line and a date line first.
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(now))
    return "#\n#" + stamp + "\n" + "".join(f"{k}={v}\n" for k, v in sorted(props.items()))


def read_meta_properties(path: Path) -> MetaProperties | None:
    """The log dir's identity, or None if the file is absent."""
    try:
        props = parse_properties(read_text(path))
    except FileNotFoundError:
        return None
    try:
        version = int(props["version"])
        node = props.get("node.id", props.get("broker.id"))
        return MetaProperties(
            version=version,
            cluster_id=props.get("cluster.id"),
            node_id=None if node is None else int(node),
            directory_id=props.get("directory.id"),
        )
    except (KeyError, ValueError) as exc:
        raise CheckpointError(f"malformed {path}: {exc}") from None


def write_meta_properties(path: Path, meta: MetaProperties) -> None:
    write_atomically(path, format_properties(meta.to_properties()).encode())


# ------------------------------------------------------------------ partition.metadata


def write_partition_metadata(partition_dir: Path, topic_id: str, *, sync: bool = True,
                             new: bool = False) -> None:
    """`new`: the dir was just made (write_new_file)."""
    uuid_from_str(topic_id)  # refuse to write what Kafka could not read back
    text = f"version: 0\ntopic_id: {topic_id}"
    write = write_new_file if new else write_atomically
    write(partition_dir / PARTITION_METADATA, text.encode(), sync=sync)


def read_partition_metadata(partition_dir: Path) -> str | None:
    """The topic id recorded in a partition dir, or None if there is none."""
    path = partition_dir / PARTITION_METADATA
    try:
        lines = read_text(path).splitlines()
    except FileNotFoundError:
        return None
    try:
        version = lines[0].split(":", 1)
        topic = lines[1].split(":", 1)
        if version[0].strip() != "version" or int(version[1]) != 0:
            raise CheckpointError(f"unknown version line in {path}: {lines[0]}")
        if topic[0].strip() != "topic_id":
            raise CheckpointError(f"malformed topic id line in {path}: {lines[1]}")
        topic_id = topic[1].strip()
        if uuid_from_str(topic_id) == _ZERO_UUID:
            raise CheckpointError(f"zero topic id in {path}")
        return topic_id
    except (IndexError, ValueError):
        raise CheckpointError(f"malformed {path}") from None


def read_or_repair_partition_metadata(partition_dir: Path, topic_id: str | None) -> str | None:
    """The topic id in a partition dir; a damaged `partition.metadata` is rewritten
    with `topic_id` (the id the metadata holds for the dir's topic) rather than
    stopping the broker, or treated as absent when the topic is unknown."""
    try:
        return read_partition_metadata(partition_dir)
    except CheckpointError as exc:
        if topic_id is None:
            log.warning("ignoring the damaged %s (%s): the topic is not in the metadata",
                        partition_dir / PARTITION_METADATA, exc)
            return None
        log.warning("rewriting the damaged %s (%s) with topic id %s from the metadata",
                    partition_dir / PARTITION_METADATA, exc, topic_id)
        write_partition_metadata(partition_dir, topic_id)
        return topic_id
