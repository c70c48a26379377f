"""LeaderEpochFileCache: where each leader epoch started, in `leader-epoch-checkpoint`.

The file is Kafka's checkpoint format: "0\\n<count>\\n<epoch> <start offset>\\n…". It is
rewritten (atomically) only when an epoch begins or the log is truncated, so the
append path pays nothing for it. Followers and consumers use `end_offset_for` (the
OffsetForLeaderEpoch API) to find where their copy of the log diverges.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from odradek.storage.checkpoints import (
    CHECKPOINT_VERSION,
    CheckpointError,
    format_checkpoint,
    fsync_dir,
    fsync_file,
    parse_checkpoint,
    read_text,
    write_atomically,
    write_new_file,
)
from odradek.storage.descriptors import is_exhausted

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    def __init__(self, path: Path, *, sync: bool = True, new: bool = False) -> None:
        """`sync=False`: writes are not fsynced; the log calls `sync()` before its
        recovery point advances (Kafka's KAFKA-15046: becoming leader of thousands of
        partitions paid an fsync each). `new`: the file cannot exist yet (a partition
        dir just made), so it is not read and its first write needs no rename."""
        self.path = path
        self._sync = sync
        # set when the file could not be read: the log rebuilds it from its batches
        self.damaged: str | None = None
        self.unsaved = False  # a write failed for want of descriptors: retried later
        self._unsynced = False
        self._fresh = new
        self._entries: list[EpochEntry] = [] if new else self._read()
        # what the file holds (None: unknown): a write of the same entries is skipped
        self._on_disk: list[EpochEntry] | None = None if self.damaged else list(self._entries)

    def _read(self) -> list[EpochEntry]:
        try:
            text = read_text(self.path)
        except FileNotFoundError:
            return []
        except CheckpointError as exc:
            return self._unreadable(exc)
        try:
            version, lines = parse_checkpoint(text, self.path)
            if version != CHECKPOINT_VERSION:
                raise CheckpointError(f"unknown version {version}")
            entries = [EpochEntry(int(e), int(o)) for e, o in lines]
            for previous, entry in zip([EpochEntry(-1, 0), *entries], entries, strict=False):
                if entry.epoch <= previous.epoch or entry.start_offset < previous.start_offset:
                    raise CheckpointError(f"entry {entry.epoch} {entry.start_offset} is out of "
                                          f"order or negative")
        except (CheckpointError, ValueError) as exc:
            return self._unreadable(exc)
        return entries

    def _unreadable(self, exc: Exception) -> list[EpochEntry]:
        self.damaged = str(exc)
        log.warning("ignoring the damaged %s (%s): its epochs are rebuilt from the log's "
                    "batches", self.path, exc)
        return []

    def rebuild(self, batch_epochs: Iterable[tuple[int, int]]) -> None:
        """Refill a damaged cache from (leader epoch, base offset) of every batch in
        log order: each epoch starts at its first batch, as recovery assigns them."""
        self._entries = []
        for epoch, base_offset in batch_epochs:
            latest = self.latest_epoch
            if epoch >= 0 and (latest is None or epoch > latest):
                self._entries.append(EpochEntry(epoch, base_offset))
        self.flush()
        log.warning("rebuilt %s from the log: %d epoch(s)", self.path, len(self._entries))
        self.damaged = None

    def flush(self) -> None:
        if self._entries == self._on_disk:
            self.unsaved = False
            return
        lines = (f"{e.epoch} {e.start_offset}" for e in self._entries)
        try:
            data = format_checkpoint(lines).encode()
            if self._fresh:
                write_new_file(self.path, data, sync=self._sync)
                self._fresh = False
            else:
                write_atomically(self.path, data, sync=self._sync)
        except OSError as exc:
            if not is_exhausted(exc):
                raise
            # Out of descriptors is not a failing disk: the entries stay in memory and
            # are written by the next change or the close (recovery rebuilds them
            # from the batches after a crash).
            log.debug("%s not written for now: %s", self.path, exc)
            self.unsaved = True
            return
        self.unsaved = False
        self._unsynced = not self._sync
        self._on_disk = list(self._entries)

    def sync(self) -> None:
        """Make the last write durable, if it was not."""
        if self.unsaved:
            self.flush()
        if not self._unsynced:
            return
        self._unsynced = False
        try:
            fsync_file(self.path)
        except FileNotFoundError:
            return
        fsync_dir(self.path.parent)

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; True if the file changed.

        Entries that would break monotonicity (an epoch ≥ this one, or a start offset
        ≥ this one) are removed first, as Kafka does.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch {epoch} at offset {start_offset}")
        latest = self.latest_entry
        if latest is not None and latest.epoch == epoch and start_offset >= latest.start_offset:
            return False
        while self._entries and (
            self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset
        ):
            self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        self.flush()
        return True

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch the record at `offset` was written in, if known."""
        previous = None
        for entry in self._entries:
            if entry.start_offset == offset:
                return entry.epoch
            if entry.start_offset > offset:
                return previous
            previous = entry.epoch
        return previous

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, Kafka's rules:

        the latest epoch ends at the log end; an older one ends where the next known
        epoch starts, reported with the largest known epoch ≤ the requested one; an
        epoch below every known one gets the first known start offset; unknown or
        undefined gives (-1, -1).
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        higher = bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._entries[0].start_offset
        return self._entries[higher - 1].epoch, self._entries[higher].start_offset

    def truncate_from_end(self, end_offset: int, *, write: bool = True) -> None:
        """Forget epochs starting at or after `end_offset` (the log was cut there).

        `write=False` (loading a log): written by the next change, the next sync or the
        close, not now, as Kafka's truncateFromEndAsyncFlush — loading an empty
        partition cut its epoch and becoming its leader wrote it back: two file writes
        per partition per start-up. A crash first leaves epochs past the log end,
        which the next load cuts again."""
        latest = self.latest_entry
        if end_offset >= 0 and latest is not None and latest.start_offset >= end_offset:
            while self._entries and self._entries[-1].start_offset >= end_offset:
                self._entries.pop()
            if write:
                self.flush()
            else:
                self.unsaved = True

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: the epoch covering it starts there."""
        removed = []
        while self._entries and self._entries[0].start_offset <= start_offset:
            removed.append(self._entries.pop(0))
        if removed:
            first = EpochEntry(removed[-1].epoch, start_offset)
            self._entries.insert(0, first)
            if removed != [first]:  # unchanged at every start-up: no rewrite
                self.flush()

    def clear(self) -> None:
        self._entries = []
        self.flush()

    def delete(self) -> None:
        self._entries = []
        self.path.unlink(missing_ok=True)
        self._on_disk = []
