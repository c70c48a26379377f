"""The internal topic's partitions as a coordinator sees them: append as the leader
with acks=all, read up to the log end, the partition's leader epoch.

`ReplicaLog` is that view over the broker's replica manager; tests give the runtime
a `storage.Log` or an in-memory list instead. Nothing here knows of the server."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from odradek.protocol.records import NewRecord, encode_batch
from odradek.storage.producer_state import AppendOrigin

Record = tuple[bytes, bytes | None]  # (key, value); a None value is a tombstone


class CoordinatorLog(Protocol):
    async def append(self, partition: int, records: Sequence[Record], *,
                     producer_id: int = -1, producer_epoch: int = -1,
                     transactional: bool = False) -> int | None:
        """Append as the leader; returns once the write is committed (raises KafkaError),
        with the offset of the first record (None: the log does not say).
        With `transactional`, the records are the producer's transactional batch: its
        marker in this partition later decides whether they count."""

    def read(self, partition: int, offset: int, max_bytes: int) -> tuple[bytes, int]:
        """(whole record batches from `offset`, the log end)."""

    def log_start_offset(self, partition: int) -> int: ...

    def leader_epoch(self, partition: int) -> int:
        """The partition's leader epoch (transaction markers carry it)."""


class ReplicaPartition(Protocol):
    leader_epoch: int
    log: Any

    async def append_committed(self, records: bytearray, timeout_s: float, **kw: Any
                               ) -> Any: ...

    def read_to_log_end(self, offset: int, max_bytes: int) -> tuple[bytes, int]: ...


class Replicas(Protocol):
    def get(self, topic: str, partition: int) -> Any: ...


def encode_records(records: Sequence[Record], producer_id: int = -1, producer_epoch: int = -1,
                   transactional: bool = False) -> bytearray:
    if not transactional:
        return bytearray(encode_batch([NewRecord(key=k, value=v) for k, v in records]))
    # Kafka writes a coordinator's transactional records (TxnOffsetCommit) as the
    # producer's batch with sequence 0, appended as the coordinator: no sequence checks
    return bytearray(encode_batch([NewRecord(key=k, value=v) for k, v in records],
                                  producer_id=producer_id, producer_epoch=producer_epoch,
                                  base_sequence=0, transactional=True))


class ReplicaLog:
    """A coordinator topic's partitions through the replica manager: appends wait for
    the ISR (acks=all) for at most `timeout_ms()` (`offsets.commit.timeout.ms`, read
    at each write: a dynamic config change applies to the next one)."""

    def __init__(self, replicas: Replicas, topic: str, timeout_ms: Callable[[], int]) -> None:
        self.replicas = replicas
        self.topic = topic
        self.timeout_ms = timeout_ms

    def _partition(self, partition: int) -> ReplicaPartition:
        p: ReplicaPartition = self.replicas.get(self.topic, partition)
        return p

    async def append(self, partition: int, records: Sequence[Record], *,
                     producer_id: int = -1, producer_epoch: int = -1,
                     transactional: bool = False) -> int | None:
        batch = encode_records(records, producer_id, producer_epoch, transactional)
        p = self._partition(partition)
        timeout_s = self.timeout_ms() / 1000
        if transactional:
            info = await p.append_committed(batch, timeout_s,
                                            origin=AppendOrigin.COORDINATOR)
        else:
            info = await p.append_committed(batch, timeout_s)
        return int(info.first_offset)

    def read(self, partition: int, offset: int, max_bytes: int) -> tuple[bytes, int]:
        return self._partition(partition).read_to_log_end(offset, max_bytes)

    def log_start_offset(self, partition: int) -> int:
        start: int = self._partition(partition).log.log_start_offset
        return start

    def leader_epoch(self, partition: int) -> int:
        return self._partition(partition).leader_epoch
