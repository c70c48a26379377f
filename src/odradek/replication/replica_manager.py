"""The replica manager: the broker's partitions and the reads and writes on them.

A single broker leads every partition it holds, so the high watermark follows the log
end offset at each append. With followers the watermark will advance as they fetch;
everything above this layer already reads up to `high_watermark`, not the log end.

read_committed fetches read up to the last stable offset and get the aborted
transactions overlapping what they read. A waiting read_committed fetch is woken when
the LSO moves — by an append outside any transaction, or by a transaction marker — not
by appends inside an open transaction, which it could not read anyway.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from odradek.protocol.errors import KafkaError, UnknownTopicOrPartition
from odradek.replication.purgatory import DelayedFetch
from odradek.storage.producer_state import AppendOrigin

if TYPE_CHECKING:
    from odradek.cluster.metadata import MetadataImage, PartitionInfo
    from odradek.storage.log import AppendInfo, Log
    from odradek.storage.manager import LogManager

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Partition:
    topic: str
    index: int
    topic_id: uuid.UUID
    log: Log
    leader_epoch: int = 0
    waiters: set[DelayedFetch] = field(default_factory=set)

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

    def append(self, records: bytearray | memoryview,
               origin: AppendOrigin = AppendOrigin.CLIENT) -> AppendInfo:
        lso = self.log.last_stable_offset if self.waiters else 0
        info = self.log.append_as_leader(records, self.leader_epoch, origin=origin)
        if not info.duplicate:
            # the only replica: everything appended is committed
            self.log.high_watermark = self.log.log_end_offset
            if self.waiters:
                nbytes = len(records)
                stable = self.log.last_stable_offset > lso
                for waiter in list(self.waiters):
                    if stable or not waiter.read_committed:
                        waiter.on_append(nbytes)
        self.log.maybe_flush()
        return info

    def append_marker(self, *, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                      commit: bool) -> AppendInfo:
        """Write a transaction marker as the leader (what WriteTxnMarkers does)."""
        lso = self.log.last_stable_offset
        info = self.log.append_marker(
            producer_id=producer_id, producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch, commit=commit,
            leader_epoch=self.leader_epoch)
        self.log.high_watermark = self.log.log_end_offset
        if self.waiters and self.log.last_stable_offset > lso:
            # what became readable is not known in bytes: let read_committed waiters
            # read again (uncommitted ones saw the data when it was appended)
            for waiter in list(self.waiters):
                if waiter.read_committed:
                    waiter.complete()
        self.log.maybe_flush()
        return info


@dataclass(frozen=True, slots=True)
class PartitionRead:
    """One partition's part of a fetch."""

    partition: Partition | None
    error: KafkaError | None
    records: bytes = b""
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    # read_committed only: (producer id, first offset) of the aborted transactions the
    # records overlap; None for read_uncommitted (FetchResponse writes null then)
    aborted: list[tuple[int, int]] | None = None


AlterIsr = Callable[[str, int, int, int, tuple[int, ...]], Awaitable["PartitionInfo | None"]]
"""(topic, partition, leader epoch, partition epoch, new ISR) -> the new state, or None
when the write lost to a newer one (the controller moved the partition): a leader's
conditional ISR change, as Kafka's ZooKeeper-mode leaders write the partition state."""


class ReplicaManager:
    def __init__(self, logs: LogManager, node_id: int = 0) -> None:
        self.logs = logs
        self.node_id = node_id
        self.partitions: dict[tuple[str, int], Partition] = {}
        # set by the broker when the metadata lives in ZooKeeper; a single broker with
        # the embedded store has no followers, so no ISR ever changes
        self.alter_isr: AlterIsr | None = None

    def apply_leadership(self, image: MetadataImage) -> None:
        """Follow the image's leaders, epochs and ISRs.

        The broker calls this on its event loop after every metadata change, once the
        log and the Partition of every replica it hosts exist.
        """
        for topic in image.topics.values():
            for info in topic.partitions:
                p = self.partitions.get((topic.name, info.partition))
                if p is not None:
                    p.leader_epoch = info.leader_epoch

    async def shutdown(self) -> None:
        """Stop what runs in the background (replica fetchers) before the logs close."""

    def get(self, topic: str, index: int) -> Partition:
        p = self.partitions.get((topic, index))
        if p is None:
            raise UnknownTopicOrPartition(
                f"This server does not host this topic-partition {topic}-{index}"
            )
        return p

    def add(self, partition: Partition) -> None:
        self.partitions[(partition.topic, partition.index)] = partition

    def remove_topic(self, topic: str) -> list[Partition]:
        gone = [p for key, p in self.partitions.items() if key[0] == topic]
        for p in gone:
            del self.partitions[(p.topic, p.index)]
            for waiter in list(p.waiters):
                waiter.complete()
        return gone

    def topic_partitions(self, topic: str) -> list[Partition]:
        return sorted(
            (p for key, p in self.partitions.items() if key[0] == topic), key=lambda p: p.index
        )

    # ---- fetch ------------------------------------------------------------------

    def read(
        self,
        wanted: Iterable[tuple[Partition | None, KafkaError | None, int, int]],
        max_bytes: int,
        read_committed: bool,
    ) -> tuple[list[PartitionRead], int]:
        """Read each (partition, error, offset, partition_max_bytes) within `max_bytes` overall.

        The first partition with data returns at least one whole batch even when it is
        larger than the limits (KIP-74), so a consumer always makes progress.
        """
        results: list[PartitionRead] = []
        total = 0
        for partition, error, offset, partition_max in wanted:
            if partition is None:
                results.append(PartitionRead(None, error))
                continue
            limit = partition.last_stable_offset if read_committed else partition.high_watermark
            budget = min(partition_max, max(max_bytes - total, 0))
            try:
                result = partition.log.read(
                    offset, budget, max_offset=limit, min_one_batch=total == 0
                )
            except KafkaError as e:
                results.append(
                    PartitionRead(
                        partition,
                        e,
                        high_watermark=partition.high_watermark,
                        last_stable_offset=partition.last_stable_offset,
                        log_start_offset=partition.log.log_start_offset,
                    )
                )
                continue
            total += len(result.records)
            aborted = None
            if read_committed:
                aborted = partition.log.collect_aborted_transactions(offset, result.records)
            results.append(
                PartitionRead(
                    partition,
                    None,
                    result.records,
                    partition.high_watermark,
                    partition.last_stable_offset,
                    partition.log.log_start_offset,
                    aborted,
                )
            )
        return results, total
