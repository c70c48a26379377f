"""Load a coordinator partition: read it from its log start to its log end and replay
every record into the partition's state machine (Kafka's CoordinatorLoader).

The whole log is read, not the compacted view: the last record for a key wins and a
tombstone removes it, which is what compaction leaves behind, so a compacted and an
uncompacted log load the same state. Control batches (transaction markers) reach the
state machine as the end of the producer's transaction. A batch or a record the
state machine cannot read is logged and skipped: one bad record (a fuzzed append,
a bug of an older version) must never keep a partition's coordinator from serving.
The reads yield to the event loop between chunks, so a large partition does not
stall the broker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Protocol

from odradek.coordinator.runtime.log import CoordinatorLog
from odradek.protocol.batch import BatchHeader, iter_headers
from odradek.protocol.errors import KafkaError
from odradek.protocol.records import ControlType, Record, decode_batch, read_control_record

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20


class CoordinatorShard(Protocol):
    """A partition's state machine, as the runtime drives it."""

    def replay(self, batch: BatchHeader, record: Record) -> None:
        """Apply one record read from the log (raise anything to have it skipped)."""

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        """The producer's transaction marker: its transactional records count or go."""

    def on_loaded(self) -> None:
        """The log is replayed to its end: start serving (and start timers)."""

    def on_unloaded(self) -> None:
        """The partition moved away (its timers are already cancelled)."""


@dataclass
class LoadSummary:
    records: int = 0
    skipped: int = 0
    end_offset: int = 0
    seconds: float = 0.0


async def load(coordinator_log: CoordinatorLog, name: str, partition: int,
               shard: CoordinatorShard, chunk_bytes: int = CHUNK_BYTES) -> LoadSummary:
    """Replay `name`-`partition` into `shard`; raises only when the log cannot be read."""
    started = time.perf_counter()
    summary = LoadSummary()
    position = coordinator_log.log_start_offset(partition)
    while True:
        data, log_end = coordinator_log.read(partition, position, chunk_bytes)
        summary.end_offset = log_end
        if position >= log_end or not data:
            break
        before = position
        try:
            for start, header in iter_headers(data):
                position = header.last_offset + 1
                _replay_batch(data, start, header, name, partition, shard, summary)
        except KafkaError as exc:
            # a batch whose frame cannot be read: nothing after it can be found
            log.error("%s-%d: unreadable batch frame after offset %d, loading stops "
                      "there: %s", name, partition, position, exc)
            break
        if position <= before:
            log.error("%s-%d: no complete batch at offset %d, loading stops there",
                      name, partition, position)
            break
        await asyncio.sleep(0)
    summary.seconds = time.perf_counter() - started
    return summary


def _replay_batch(data: bytes, start: int, header: BatchHeader, name: str, partition: int,
                  shard: CoordinatorShard, summary: LoadSummary) -> None:
    try:
        batch = decode_batch(data, start)
    except KafkaError as exc:
        summary.skipped += max(header.records_count, 1)
        log.warning("skipping unreadable batch at %s-%d offsets %d-%d: %s", name, partition,
                    header.base_offset, header.last_offset, exc)
        return
    if batch.is_control:
        if len(batch):
            try:
                kind, _ = read_control_record(batch.records[0])
            except KafkaError as exc:
                summary.skipped += 1
                log.warning("skipping unreadable transaction marker at %s-%d offset %d: %s",
                            name, partition, batch.base_offset, exc)
                return
            if kind in (ControlType.COMMIT, ControlType.ABORT):
                shard.replay_end_transaction(header.producer_id, kind is ControlType.COMMIT)
        return
    for record in batch:
        try:
            shard.replay(header, record)
            summary.records += 1
        except Exception as exc:  # whatever the record holds, the load goes on
            summary.skipped += 1
            log.warning("skipping unreadable record at %s-%d offset %d: %s: %s", name,
                        partition, record.offset, type(exc).__name__, exc)
