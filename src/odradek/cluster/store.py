"""Where the metadata image is kept.

`FileMetadataStore` is the embedded store of a single broker, in the first log dir: a
snapshot (`odradek-cluster-metadata.json`, replaced atomically) and a log of the changes
made since (`odradek-cluster-metadata.log`, one JSON record a line, appended and
fsynced per change). A change costs what it changed, not the whole image: rewriting the
snapshot on every change made creating 20,000 partitions quadratic (issue 12). When the
log outgrows the snapshot, the next change writes a new snapshot and empties the log.

Records are idempotent ("this topic is now …", "the cluster-wide fields are now …"), so
replaying a log over a snapshot that already holds some of it is harmless: a crash
between writing a snapshot and emptying the log loses nothing. A torn last record (a
crash in the middle of an append, never acknowledged) is dropped at load with one line.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

METADATA_FILE = "odradek-cluster-metadata.json"
METADATA_LOG = "odradek-cluster-metadata.log"
MIN_LOG_BYTES_BEFORE_SNAPSHOT = 1 << 20



class MetadataStore(Protocol):
    def load(self) -> dict[str, Any] | None: ...

    def save(self, data: dict[str, Any]) -> None: ...

    def append(self, records: Iterable[dict[str, Any]]) -> None: ...

    def wants_snapshot(self) -> bool: ...


def topic_record(name: str, value: dict[str, Any] | None) -> dict[str, Any]:
    """The topic is now `value` (None: deleted)."""
    return {"topic": name, "value": value}


def header_record(header: dict[str, Any]) -> dict[str, Any]:
    return {"header": header}


def features_record(features: dict[str, Any]) -> dict[str, Any]:
    """The finalized feature levels are now `features` (MetadataImage.features_json)."""
    return {"features": features}


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileMetadataStore:
    def __init__(self, directory: Path) -> None:
        self.path = directory / METADATA_FILE
        self.log_path = directory / METADATA_LOG
        self._log_bytes = 0
        self._snapshot_bytes = 0

    # ---- reading ------------------------------------------------------------------

    def load(self) -> dict[str, Any] | None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            raw = b""
        data: dict[str, Any] | None = json.loads(raw) if raw else None
        self._snapshot_bytes = len(raw)
        records = self._read_log()
        if not records:
            return data
        data = dict(data or {})
        topics = {t["name"]: t for t in data.get("topics", [])}
        for record in records:
            if "topic" in record:
                if record["value"] is None:
                    topics.pop(record["topic"], None)
                else:
                    topics[record["topic"]] = record["value"]
            elif "header" in record:
                data.update(record["header"])
            elif "features" in record:
                data["features"] = record["features"]
        data["topics"] = list(topics.values())
        return data

    def _read_log(self) -> list[dict[str, Any]]:
        try:
            raw = self.log_path.read_bytes()
        except FileNotFoundError:
            self._log_bytes = 0
            return []
        records: list[dict[str, Any]] = []
        good = 0
        for line in raw.splitlines(keepends=True):
            try:
                if not line.endswith(b"\n"):
                    raise ValueError("no end of line")
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise ValueError("not a record")
            except ValueError:
                log.warning(
                    "%s: dropping %d bytes after the last whole record (a write cut short "
                    "by a crash; that change was never acknowledged). Nothing to do unless "
                    "the file was edited by hand: then restore it from a backup",
                    self.log_path, len(raw) - good)
                with open(self.log_path, "r+b") as f:
                    f.truncate(good)
                    os.fsync(f.fileno())
                break
            records.append(record)
            good += len(line)
        self._log_bytes = good
        return records

    # ---- writing ------------------------------------------------------------------

    def save(self, data: dict[str, Any]) -> None:
        """A full snapshot; the change log it covers is emptied after it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        text = json.dumps(data, separators=(",", ":"), sort_keys=True).encode()
        with open(tmp, "wb") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)
        self._snapshot_bytes = len(text)
        if self._log_bytes or self.log_path.exists():
            self.log_path.unlink(missing_ok=True)
            _fsync_dir(self.path.parent)
            self._log_bytes = 0

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        """One change's records, durable when this returns."""
        data = b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n"
                        for r in records)
        if not data:
            return
        new_file = not self.log_path.exists()
        fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fdatasync(fd)
        finally:
            os.close(fd)
        if new_file:
            _fsync_dir(self.log_path.parent)
        self._log_bytes += len(data)

    def wants_snapshot(self) -> bool:
        """The log has outgrown the snapshot: replaying it would cost more than reading
        a fresh snapshot."""
        return self._log_bytes > max(MIN_LOG_BYTES_BEFORE_SNAPSHOT, self._snapshot_bytes)
