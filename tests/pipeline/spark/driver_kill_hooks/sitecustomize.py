"""Kill points for the driver-kill tests: on the PYTHONPATH of an `odradek lake ingest`
driver the test starts, this wraps the lake writer's commit path and SIGKILLs the
driver's whole process group (the Python driver and its Spark JVM) at one chosen point,
as a machine that loses power would. Nothing in odradek knows about it.

    ODRADEK_KILL_AT         the point (see POINTS)
    ODRADEK_KILL_FROM_BATCH the first batch id it may hit (default 1)
    ODRADEK_KILL_MARK       a file that gets "<point> <batch id>" just before the kill

Any other Python process (the Spark workers' daemons) that sees the variables is left
alone: only a process started as `… odradek … ingest …` is armed.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

POINTS = (
    # the quarantine table's catalog commit: its new metadata file written, the catalog
    # row not yet pointed at it
    "quarantine-metadata-written",
    # the quarantine commit done, the events table's commit not started
    "quarantine-committed",
    # (a) the batch's Parquet files written, its Iceberg commit not started
    "before-commit",
    # (b) the events table's catalog commit: new metadata file written, pointer not swapped
    "metadata-written",
    # (c) the Iceberg commit done, the foreachBatch call returned: Spark has not yet
    # written the batch to its commit log
    "sink-returned",
)


def _die(point: str, batch_id: int) -> None:
    mark = os.environ.get("ODRADEK_KILL_MARK")
    if mark:
        with open(mark, "w") as f:
            f.write(f"{point} {batch_id}\n")
            f.flush()
            os.fsync(f.fileno())
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _arm(point: str, first_batch: int) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    from odradek.pipeline import lake_writer

    writer = lake_writer.LakeWriter
    state: dict[str, Any] = {"batch": -1, "in": None}

    def due(name: str) -> bool:
        return point == name and state["batch"] >= first_batch

    write_batch = writer.write_batch

    def wrapped_write_batch(self: Any, df: Any, batch_id: int) -> Any:
        state["batch"], state["in"] = batch_id, None
        return write_batch(self, df, batch_id)

    append_quarantine = writer._append_quarantine

    def wrapped_append_quarantine(self: Any, *args: Any, **kwargs: Any) -> Any:
        state["in"] = "quarantine"
        try:
            out = append_quarantine(self, *args, **kwargs)
        finally:
            state["in"] = None
        if due("quarantine-committed"):
            _die(point, state["batch"])
        return out

    commit = writer._commit

    def wrapped_commit(self: Any, *args: Any, **kwargs: Any) -> Any:
        if due("before-commit"):
            _die(point, state["batch"])
        state["in"] = "events"
        try:
            return commit(self, *args, **kwargs)
        finally:
            state["in"] = None

    call = writer.__call__

    def wrapped_call(self: Any, df: Any, batch_id: int) -> None:
        call(self, df, batch_id)
        if due("sink-returned"):
            _die(point, batch_id)

    write_metadata = SqlCatalog._write_metadata

    def wrapped_write_metadata(metadata: Any, io: Any, metadata_path: str) -> None:
        write_metadata(metadata, io, metadata_path)
        if (state["in"] == "events" and due("metadata-written")) or (
                state["in"] == "quarantine" and due("quarantine-metadata-written")):
            _die(point, state["batch"])

    writer.write_batch = wrapped_write_batch  # type: ignore[method-assign]
    writer._append_quarantine = wrapped_append_quarantine  # type: ignore[method-assign]
    writer._commit = wrapped_commit  # type: ignore[method-assign]
    writer.__call__ = wrapped_call  # type: ignore[method-assign]
    SqlCatalog._write_metadata = staticmethod(wrapped_write_metadata)  # type: ignore[method-assign]


def _main() -> None:
    point = os.environ.get("ODRADEK_KILL_AT")
    argv = getattr(sys, "orig_argv", [])
    if not point or "odradek" not in argv or "ingest" not in argv:
        return
    if point not in POINTS:
        raise SystemExit(f"ODRADEK_KILL_AT={point}: not one of {', '.join(POINTS)}")
    _arm(point, int(os.environ.get("ODRADEK_KILL_FROM_BATCH", "1")))


_main()
