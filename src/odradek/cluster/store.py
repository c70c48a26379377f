"""Where the metadata image is kept.

`FileMetadataStore` is the embedded store of a single broker: one JSON file in the
first log dir, replaced atomically. A ZooKeeper store for clusters implements the same
two methods.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Protocol

METADATA_FILE = "odradek-cluster-metadata.json"


class MetadataStore(Protocol):
    def load(self) -> dict[str, Any] | None: ...

    def save(self, data: dict[str, Any]) -> None: ...


class FileMetadataStore:
    def __init__(self, directory: Path) -> None:
        self.path = directory / METADATA_FILE

    def load(self) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        return data

    def save(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
