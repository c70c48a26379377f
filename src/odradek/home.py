"""The data home: one folder for everything odradek keeps, with the same layout for every
command.

    $ODRADEK_HOME                 (default $XDG_DATA_HOME/odradek = ~/.local/share/odradek)
    ├── .odradek-home             marks the folder as odradek's
    ├── data/                     the broker's log.dirs (Kafka's files)
    ├── lake/catalog.db           the Iceberg catalog (SQLite)
    ├── lake/warehouse/           the Iceberg tables' data and metadata files
    ├── checkpoints/<query>/      Spark's streaming checkpoints (iot.events, device-stats, …)
    └── kafka/bin/                Kafka's script names (`odradek kafka-path`)

`--data-dir` always names this root, never one of its sub-folders. Commands that write
call `prepare()` (refuses a file, a folder it cannot write, another program's folder);
read-only commands call nothing that creates: they check and fail in one line.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

ENV_HOME = "ODRADEK_HOME"
MARKER = ".odradek-home"
# what odradek itself puts in a home (pipeline/: where `odradek up` kept its lake before)
OURS = frozenset({MARKER, "data", "lake", "checkpoints", "kafka", "pipeline"})


class HomeError(Exception):
    """A data home odradek cannot use; the message is one line naming the fix."""


def default_root() -> Path:
    """ODRADEK_HOME, else $XDG_DATA_HOME/odradek: durable, never /tmp (wiped on reboot)."""
    explicit = os.environ.get(ENV_HOME)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "odradek"


@dataclass(frozen=True)
class Home:
    root: Path

    @classmethod
    def at(cls, data_dir: Path | None = None) -> Home:
        """The home `--data-dir` names, or the default one."""
        return cls((data_dir.expanduser() if data_dir is not None else default_root()).absolute())

    @property
    def broker_data(self) -> Path:
        return self.root / "data"

    @property
    def lake(self) -> Path:
        return self.root / "lake"

    @property
    def catalog_db(self) -> Path:
        return self.lake / "catalog.db"

    @property
    def warehouse(self) -> Path:
        return self.lake / "warehouse"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    def checkpoint(self, name: str) -> Path:
        return self.checkpoints / name

    @property
    def is_default(self) -> bool:
        return self.root == default_root().absolute()

    def option(self) -> str:
        """What a printed command needs to reach this home: nothing for the default one."""
        return "" if self.is_default else f" --data-dir {shlex.quote(str(self.root))}"

    def check(self) -> None:
        """Refuse what cannot be a home, creating nothing."""
        root = self.root
        if root.exists() and not root.is_dir():
            raise HomeError(f"data home {root} is a file, not a folder: point --data-dir (or "
                            f"{ENV_HOME}) at a folder")
        if root.is_dir():
            try:
                names = {p.name for p in root.iterdir()}
            except PermissionError:
                raise HomeError(f"data home {root} cannot be read: fix its permissions or "
                                f"point --data-dir (or {ENV_HOME}) elsewhere") from None
            if "catalog.db" in names and MARKER not in names:
                raise HomeError(f"{root} is a lake folder (catalog.db inside), not a data "
                                "home: --data-dir names the folder above lake/ now; to read "
                                f"this one, --catalog-uri sqlite:///{root / 'catalog.db'}")
            foreign = sorted(names - OURS)
            if foreign and MARKER not in names and not names & OURS:
                shown = ", ".join(foreign[:3]) + (", …" if len(foreign) > 3 else "")
                raise HomeError(f"data home {root} holds files that are not odradek's ({shown}):"
                                f" point --data-dir (or {ENV_HOME}) at an empty or new folder")
        existing = root
        while not existing.exists():
            existing = existing.parent
        if not os.access(existing, os.W_OK | os.X_OK):
            raise HomeError(f"data home {root} is not writable ({existing} belongs to someone "
                            f"else or is read-only): point --data-dir (or {ENV_HOME}) at a "
                            "folder you can write")

    def prepare(self) -> Home:
        """Check, then create the home and mark it as odradek's. For commands that write."""
        self.check()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            marker = self.root / MARKER
            if not marker.exists():
                marker.write_text("odradek's data home: broker data in data/, the lake in "
                                  "lake/, Spark checkpoints in checkpoints/\n")
        except OSError as e:
            raise HomeError(f"cannot create data home {self.root}: {e.strerror}; point "
                            f"--data-dir (or {ENV_HOME}) at a folder you can write") from None
        return self

    def missing(self, what: str, path: Path) -> str:
        """The one line a read-only command says when `path` is not there."""
        hint = (f"point --data-dir (or {ENV_HOME}) at the data home that holds it"
                if self.is_default else "check --data-dir, or leave it out for the default "
                f"home {default_root()}")
        return f"no {what} at {path}: {hint}"
