"""ProducerStateManager: idempotent producers' epochs and sequences per partition.

Semantics are Kafka's ProducerAppendInfo / ProducerStateEntry:
- per producer id we keep the epoch, the last five batches' (last sequence, last
  offset, offset delta, timestamp) and the last timestamp;
- a batch equal in (epoch, first seq, last seq) to one of the five is a duplicate: it
  is not written and the original's offsets are returned;
- an epoch below the current one is InvalidProducerEpoch;
- a new epoch must start at sequence 0, unless no epoch was known;
- within an epoch the first sequence must follow the last (wrapping at 2^31);
- a producer with no state (never seen, or expired) may start at any sequence.

Snapshots: `<20-digit offset>.snapshot`, Kafka's ProducerSnapshot v1:
    version i16 · crc u32 (CRC32C of everything after it) · count i32 ·
    count x (producer id i64 · epoch i16 · last sequence i32 · last offset i64 ·
             offset delta i32 · timestamp i64 · coordinator epoch i32 ·
             current txn first offset i64)
A snapshot at offset N holds the state after every batch below N. Like Kafka, a
snapshot keeps only each producer's last batch.
"""

from __future__ import annotations

import enum
import logging
import os
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from odradek.protocol.batch import BatchHeader
from odradek.protocol.errors import (
    ErrorCode,
    InvalidProducerEpoch,
    InvalidTxnState,
    KafkaError,
    OutOfOrderSequence,
)
from odradek.storage.file_handles import read_small_file

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
INT32_MAX = (1 << 31) - 1
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000

_SNAPSHOT_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_START = _SNAPSHOT_HEAD.size


class AppendOrigin(enum.Enum):
    CLIENT = "client"  # full validation
    REPLICATION = "replication"  # the leader validated; a stale epoch only warns
    COORDINATOR = "coordinator"


class CorruptSnapshot(Exception):
    pass


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=deque)
    coordinator_epoch: int = -1
    last_timestamp: int = NO_TIMESTAMP
    current_txn_first_offset: int | None = None  # first offset of its open transaction

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def copy_without_batches(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            deque(),
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
        )

    def maybe_update_epoch(self, epoch: int) -> None:
        if self.producer_epoch != epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, delta: int, ts: int) -> None:
        self.maybe_update_epoch(epoch)
        self._add(BatchMetadata(last_seq, last_offset, delta, ts))
        self.last_timestamp = ts

    def _add(self, batch: BatchMetadata) -> None:
        if len(self.batches) == NUM_BATCHES_TO_RETAIN:
            self.batches.popleft()
        self.batches.append(batch)

    def update(self, other: ProducerStateEntry) -> None:
        self.maybe_update_epoch(other.producer_epoch)
        for batch in other.batches:
            self._add(batch)
        self.coordinator_epoch = other.coordinator_epoch
        self.current_txn_first_offset = other.current_txn_first_offset
        self.last_timestamp = other.last_timestamp

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


class ProducerAppendInfo:
    """The changes one append makes to one producer, applied only if the append succeeds."""

    def __init__(self, producer_id: int, current: ProducerStateEntry, origin: AppendOrigin):
        self.producer_id = producer_id
        self.current = current
        self.origin = origin
        self.updated = current.copy_without_batches()

    def append_data_batch(
        self,
        epoch: int,
        first_seq: int,
        last_seq: int,
        timestamp: int,
        first_offset: int,
        last_offset: int,
        transactional: bool,
    ) -> None:
        self._check_epoch(epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        self.updated.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, timestamp)
        if self.updated.current_txn_first_offset is not None and not transactional:
            raise InvalidTxnState(
                f"producer {self.producer_id} wrote a non-transactional batch at "
                f"{first_offset} inside a transaction"
            )
        if self.updated.current_txn_first_offset is None and transactional:
            self.updated.current_txn_first_offset = first_offset

    def append_end_txn_marker(
        self, epoch: int, offset: int, timestamp: int, coordinator_epoch: int | None = None
    ) -> int | None:
        """A control batch: the producer's transaction ends. Returns the first offset of
        the transaction it completes, None if none was open. A marker's epoch may be
        above the producer's (a fence bumps it): later batches of the old epoch fail."""
        self._check_epoch(epoch, offset)
        if coordinator_epoch is not None and coordinator_epoch < self.updated.coordinator_epoch:
            # a coordinator that lost its partition to a newer leader: Kafka refuses it
            message = (f"marker of producer {self.producer_id} at offset {offset} from "
                       f"coordinator epoch {coordinator_epoch}, below "
                       f"{self.updated.coordinator_epoch}")
            if self.origin is not AppendOrigin.REPLICATION:
                raise KafkaError(message, ErrorCode.transaction_coordinator_fenced)
            log.warning("%s", message)
        self.updated.maybe_update_epoch(epoch)
        if coordinator_epoch is not None:
            self.updated.coordinator_epoch = coordinator_epoch
        first = self.updated.current_txn_first_offset
        self.updated.current_txn_first_offset = None
        self.updated.last_timestamp = timestamp
        return first

    def _check_epoch(self, epoch: int, offset: int) -> None:
        current = self.updated.producer_epoch
        if epoch < current:
            message = (
                f"epoch {epoch} of producer {self.producer_id} at offset {offset} is below "
                f"the last seen epoch {current}"
            )
            if self.origin is AppendOrigin.REPLICATION:
                log.warning("%s", message)
            else:
                raise InvalidProducerEpoch(message)

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        if epoch != self.updated.producer_epoch:
            if first_seq != 0 and self.updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequence(
                    f"producer {self.producer_id} starts epoch {epoch} at sequence {first_seq}, "
                    f"not 0 (current epoch {self.updated.producer_epoch})"
                )
            return
        if not self.updated.is_empty:
            current_last = self.updated.last_seq
        elif epoch == self.current.producer_epoch:
            current_last = self.current.last_seq
        else:
            current_last = NO_SEQUENCE
        # No known epoch (its batches were deleted, or it expired): any sequence goes.
        if self.current.producer_epoch != NO_PRODUCER_EPOCH and not _in_sequence(
            current_last, first_seq
        ):
            raise OutOfOrderSequence(
                f"producer {self.producer_id} sent sequence {first_seq} at offset {offset}; "
                f"expected {current_last + 1 if current_last != INT32_MAX else 0}"
            )


def snapshot_file(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def write_snapshot(path: Path, entries: list[ProducerStateEntry], *, sync: bool) -> None:
    body = bytearray(_COUNT.pack(len(entries)))
    for e in entries:
        body += SNAPSHOT_ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            e.last_seq,
            e.last_data_offset,
            e.last_offset_delta,
            e.last_timestamp,
            e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
        )
    data = _SNAPSHOT_HEAD.pack(SNAPSHOT_VERSION, crc32c.crc32c(body)) + body
    # Written under a temporary name and renamed, so a crash leaves no half snapshot.
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    data = read_small_file(path)
    if len(data) < _SNAPSHOT_HEAD.size + _COUNT.size:
        raise CorruptSnapshot(f"{path} is too short")
    version, crc = _SNAPSHOT_HEAD.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshot(f"{path} has unknown version {version}")
    if crc32c.crc32c(memoryview(data)[_CRC_START:]) != crc:
        raise CorruptSnapshot(f"{path} fails its CRC")
    (count,) = _COUNT.unpack_from(data, _CRC_START)
    if count < 0 or len(data) != _CRC_START + _COUNT.size + count * SNAPSHOT_ENTRY.size:
        raise CorruptSnapshot(f"{path}: {count} entries do not match its size")
    entries = []
    for pid, epoch, seq, offset, delta, ts, coord, txn in SNAPSHOT_ENTRY.iter_unpack(
        memoryview(data)[_CRC_START + _COUNT.size :]
    ):
        entry = ProducerStateEntry(pid, epoch, deque(), coord, ts, txn if txn >= 0 else None)
        if offset >= 0:
            entry.batches.append(BatchMetadata(seq, offset, delta, ts))
        entries.append(entry)
    return entries


def list_snapshots(directory: Path, names: list[str] | None = None) -> dict[int, Path]:
    """`names`: the directory's listing, when the caller has it (a partition's load
    lists its directory once)."""
    found: dict[int, Path] = {}
    # os.listdir, not Path.glob: this runs for every partition at start-up, and glob
    # cost ~0.4 ms a call there
    for name in os.listdir(directory) if names is None else names:
        if name.endswith(SNAPSHOT_SUFFIX):
            stem = name[: -len(SNAPSHOT_SUFFIX)]
            if stem.isdigit():
                found[int(stem)] = directory / name
    return found


class ProducerStateManager:
    """Producer id → state for one partition, with Kafka's snapshot files."""

    def __init__(
        self,
        directory: Path,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        listing: list[str] | None = None,
    ) -> None:
        self.directory = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        # producer id → first offset of its open transaction: the last stable offset
        # is the smallest of these (Kafka's ongoingTxns), so it is kept, not searched
        self.ongoing: dict[int, int] = {}
        self.snapshots = list_snapshots(directory, listing)
        self.map_end_offset = 0  # state covers every batch below this offset
        self.last_snap_offset = 0

    # -------------------------------------------------------------- appends

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        current = self.producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(producer_id, current, origin)

    def update(self, info: ProducerAppendInfo) -> None:
        pid = info.producer_id
        current = self.producers.get(pid)
        if current is None:
            current = self.producers[pid] = info.updated
        else:
            current.update(info.updated)
        first = current.current_txn_first_offset
        if first is not None:
            self.ongoing[pid] = first
        elif self.ongoing:
            self.ongoing.pop(pid, None)

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction; None when none is open."""
        return min(self.ongoing.values()) if self.ongoing else None

    def _reset_ongoing(self) -> None:
        self.ongoing = {pid: e.current_txn_first_offset for pid, e in self.producers.items()
                        if e.current_txn_first_offset is not None}

    def replay_batch(
        self,
        *,
        producer_id: int,
        epoch: int,
        base_sequence: int,
        base_offset: int,
        last_offset_delta: int,
        max_timestamp: int,
        transactional: bool,
        control: bool,
    ) -> None:
        """Apply a batch already in the log (recovery, truncation, replication):
        no sequence checks, as Kafka loads producers with origin REPLICATION."""
        info = self.prepare_update(producer_id, AppendOrigin.REPLICATION)
        last_offset = base_offset + last_offset_delta
        try:
            if control:
                info.append_end_txn_marker(epoch, base_offset, max_timestamp)
            else:
                last_seq = (
                    NO_SEQUENCE
                    if base_sequence < 0
                    else (base_sequence + last_offset_delta) % (INT32_MAX + 1)
                )
                info.append_data_batch(
                    epoch, base_sequence, last_seq, max_timestamp, base_offset, last_offset,
                    transactional,
                )  # fmt: skip
        except InvalidTxnState as exc:
            log.warning("replaying offset %d: %s", base_offset, exc)
            return
        self.update(info)

    def replay_header(self, h: BatchHeader) -> None:
        if h.producer_id >= 0:
            self.replay_batch(
                producer_id=h.producer_id,
                epoch=h.producer_epoch,
                base_sequence=h.base_sequence,
                base_offset=h.base_offset,
                last_offset_delta=h.last_offset_delta,
                max_timestamp=h.max_timestamp,
                transactional=h.is_transactional,
                control=h.is_control,
            )

    def analyze_batches(
        self,
        batches: list[tuple[int, BatchHeader]],
        first_offset: int,
        log_append_time: int | None,
        origin: AppendOrigin,
    ) -> tuple[dict[int, ProducerAppendInfo], BatchMetadata | None]:
        """Kafka's analyzeAndValidateProducerState for an append at `first_offset`.

        Returns the staged updates (applied with `update` once the write succeeded),
        or, for a client's retry of one of a producer's last five batches, that
        batch's metadata: then nothing is written. Raises on epoch and sequence errors.
        """
        updates: dict[int, ProducerAppendInfo] = {}
        offset = first_offset
        for _, h in batches:
            last = offset + h.last_offset_delta
            pid = h.producer_id
            if pid >= 0:
                entry = self.producers.get(pid)
                if origin is AppendOrigin.CLIENT and entry is not None:
                    dup = entry.find_duplicate(h.producer_epoch, h.base_sequence, h.last_sequence)
                    if dup is not None:
                        return {}, dup
                info = updates.get(pid) or self.prepare_update(pid, origin)
                ts = h.max_timestamp if log_append_time is None else log_append_time
                info.append_data_batch(
                    h.producer_epoch, h.base_sequence, h.last_sequence, ts, offset, last,
                    h.is_transactional,
                )  # fmt: skip
                updates[pid] = info
            offset = last + 1
        return updates, None

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    @property
    def is_empty(self) -> bool:
        return not self.producers

    def _expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (
            entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget producers idle for `producer.id.expiration.ms`, judged by the
        timestamp of their last batch as Kafka does. Returns how many went."""
        gone = [pid for pid, e in self.producers.items() if self._expired(e, now_ms)]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    # -------------------------------------------------------------- snapshots

    @property
    def latest_snapshot_offset(self) -> int | None:
        return max(self.snapshots) if self.snapshots else None

    @property
    def oldest_snapshot_offset(self) -> int | None:
        return min(self.snapshots) if self.snapshots else None

    def take_snapshot(self, *, sync: bool = True) -> Path | None:
        """Write `<map end offset>.snapshot` if the state moved since the last one."""
        if self.map_end_offset <= self.last_snap_offset:
            return None
        path = snapshot_file(self.directory, self.map_end_offset)
        write_snapshot(path, list(self.producers.values()), sync=sync)
        self.snapshots[self.map_end_offset] = path
        self.last_snap_offset = self.map_end_offset
        return path

    def _remove_snapshot(self, offset: int) -> None:
        path = self.snapshots.pop(offset, None)
        if path is not None:
            path.unlink(missing_ok=True)

    def delete_snapshots_before(self, offset: int) -> None:
        for snap in [s for s in self.snapshots if s < offset]:
            self._remove_snapshot(snap)

    def remove_stray_snapshots(self, segment_base_offsets: list[int]) -> None:
        """Keep snapshots at segment bases, and the newest one if above every base
        (the one a clean shutdown wrote at the log end); delete the rest."""
        bases = set(segment_base_offsets)
        top = max(bases) if bases else -1
        strays = sorted(s for s in self.snapshots if s not in bases)
        for snap in strays[:-1]:
            self._remove_snapshot(snap)
        if strays and strays[-1] < top:
            self._remove_snapshot(strays[-1])

    def _load_latest_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        while self.snapshots:
            offset = max(self.snapshots)
            try:
                entries = read_snapshot(self.snapshots[offset])
            except (CorruptSnapshot, OSError) as exc:
                log.warning("ignoring the damaged producer snapshot (%s): producer state is "
                            "rebuilt from the batches after an older one", exc)
                self._remove_snapshot(offset)
                continue
            for entry in entries:
                if not self._expired(entry, now_ms):
                    self.producers[entry.producer_id] = entry
            self._reset_ongoing()
            self.map_end_offset = self.last_snap_offset = offset
            return
        self._reset_ongoing()
        self.map_end_offset = self.last_snap_offset = log_start_offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> None:
        """Keep snapshots within (log start, log end]; if the state is not at the log
        end, reload it from the newest of them (the caller replays what follows)."""
        for snap in list(self.snapshots):
            if snap > log_end_offset or snap <= log_start_offset:
                self._remove_snapshot(snap)
        if log_end_offset != self.map_end_offset:
            self.producers.clear()
            self._load_latest_snapshot(log_start_offset, now_ms)
        elif self.map_end_offset < log_start_offset:
            self.map_end_offset = log_start_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.producers.clear()
        self.ongoing.clear()
        for snap in list(self.snapshots):
            self._remove_snapshot(snap)
        self.last_snap_offset = 0
        self.map_end_offset = offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        if self.map_end_offset < log_start_offset:
            self.map_end_offset = log_start_offset
        self.last_snap_offset = self.latest_snapshot_offset or log_start_offset
