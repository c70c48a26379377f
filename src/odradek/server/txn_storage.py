"""The broker's side of the transaction coordinator: `__transaction_state` and markers.

The coordinator (coordinator/txn) knows no broker; this adapter gives it
- the `__transaction_state` partitions through the replica manager (the runtime's
  `ReplicaLog`), created on the first FindCoordinator for a transactional id, as
  Kafka does, and which of them this broker leads;
- a `MarkerWriter` that appends COMMIT/ABORT markers as the partitions' leader: a local
  append for the partitions this broker leads (`LocalMarkers.write`, also what
  WriteTxnMarkers runs), WriteTxnMarkers to the other leaders in a cluster
  (txn_markers.py).
A marker written to a `__consumer_offsets` partition also tells the group
coordinator, which makes the transaction's offsets visible or drops them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from odradek.coordinator.runtime import ReplicaLog
from odradek.coordinator.txn import (
    TRANSACTION_STATE_TOPIC,
    TransactionCoordinator,
    TxnConfig,
)
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server import features
from odradek.server.group_storage import (
    OFFSETS_TOPIC,
    commit_timeout_ms,
    ensure_internal_topic,
    led_partitions,
)
from odradek.server.txn_markers import RemoteMarkers, split_by_leader
from odradek.server.txn_partition_adder import PartitionAdder

if TYPE_CHECKING:
    from odradek.server.core import BrokerCore

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Found = tuple[ErrorCode, str | None, int, str, int]  # as FindCoordinator reports it


def fenced_code(code: ErrorCode, version: int, first_version_with_fenced: int) -> ErrorCode:
    """PRODUCER_FENCED (KIP-588) for clients that know it; INVALID_PRODUCER_EPOCH for
    older request versions, as Kafka answers them."""
    if code == ErrorCode.producer_fenced and version < first_version_with_fenced:
        return ErrorCode.invalid_producer_epoch
    return code


class LocalMarkers:
    """Markers appended by this broker as the leader of each partition, and sent to
    the other partitions' leaders (WriteTxnMarkers) in a cluster."""

    def __init__(self, broker: BrokerCore) -> None:
        self.broker = broker
        self.remote = RemoteMarkers(broker)

    def write(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
              commit: bool, tp: TopicPartition) -> ErrorCode:
        broker = self.broker
        try:
            partition = broker.replicas.get(*tp)
            partition.append_marker(producer_id=producer_id, producer_epoch=producer_epoch,
                                    coordinator_epoch=coordinator_epoch, commit=commit)
        except KafkaError as e:
            return e.code
        if tp[0] == OFFSETS_TOPIC:
            broker.groups.complete_transaction(tp[1], producer_id, commit)
        return ErrorCode.none

    async def write_markers(self, producer_id: int, producer_epoch: int,
                            coordinator_epoch: int, commit: bool,
                            partitions: Iterable[TopicPartition]
                            ) -> dict[TopicPartition, ErrorCode]:
        local, remote = split_by_leader(partitions, self.broker.node_id,
                                        self.remote.leader_of)
        out = {tp: self.write(producer_id, producer_epoch, coordinator_epoch, commit, tp)
               for tp in local}
        if remote:
            out.update(await self.remote.write(producer_id, producer_epoch,
                                               coordinator_epoch, commit, remote))
        return out


class BrokerTransactions:
    """`broker.transactions`: the coordinator and the server's view of it."""

    def __init__(self, broker: BrokerCore) -> None:
        self.broker = broker
        self.markers = LocalMarkers(broker)
        self.coordinator = TransactionCoordinator(
            TxnConfig.from_broker(broker.config.values()),
            ReplicaLog(broker.replicas, TRANSACTION_STATE_TOPIC,
                       lambda: commit_timeout_ms(broker)),
            self.markers, broker.controller.allocate_producer_id,
            transaction_version=lambda: features.level("transaction.version",
                                                       broker.controller.image))
        # transaction version 2's implicit add, and version 1's checks across brokers
        self.adder = PartitionAdder(broker, self.coordinator)

    def start(self) -> None:
        self.follow_leadership()
        self.coordinator.start()

    def stop(self) -> None:
        self.coordinator.stop()
        self.markers.remote.close()
        self.adder.close()

    async def ensure_topic(self) -> bool:
        """Create `__transaction_state` if it is missing; False when that failed."""
        config = self.broker.config
        return await ensure_internal_topic(
            self.broker, TRANSACTION_STATE_TOPIC,
            int(config["transaction.state.log.num.partitions"]),
            int(config["transaction.state.log.replication.factor"]),
            {"cleanup.policy": "compact",
             "compression.type": "uncompressed",
             "min.insync.replicas": str(config["transaction.state.log.min.isr"]),
             "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
             "unclean.leader.election.enable": "false"})

    def follow_leadership(self) -> None:
        """Tell the coordinator which `__transaction_state` partitions we lead now."""
        self.coordinator.follow(led_partitions(self.broker, TRANSACTION_STATE_TOPIC))

    # ---- what handlers/find_coordinator.py and init_producer_id.py call --------------

    async def find_coordinator(self, listener: str, key: str) -> Found:
        if not key:
            return ErrorCode.invalid_request, "the transactional id is empty", -1, "", -1
        if not await self.ensure_topic():
            return (ErrorCode.coordinator_not_available,
                    f"{TRANSACTION_STATE_TOPIC} could not be created", -1, "", -1)
        image = self.broker.controller.image
        partition = self.coordinator.partition_for(key)
        info = image.topics[TRANSACTION_STATE_TOPIC].partitions[partition]
        leader = image.brokers.get(info.leader)
        if leader is None or leader.fenced:
            return (ErrorCode.coordinator_not_available,
                    f"{TRANSACTION_STATE_TOPIC}-{partition} has no leader", -1, "", -1)
        host, port = leader.endpoint(listener)
        return ErrorCode.none, None, leader.node_id, host, port

    def verify_produce(self, transactional_id: str | None, producer_id: int, epoch: int,
                       tp: TopicPartition) -> ErrorCode:
        """May this transactional batch be appended? The partition must be in the
        producer's ongoing transaction. Errors as Kafka's produce path reports them:
        a fenced producer gets INVALID_PRODUCER_EPOCH, a coordinator that is busy a
        retriable NOT_ENOUGH_REPLICAS."""
        if transactional_id is None:
            return ErrorCode.invalid_txn_state
        code = self.coordinator.verify(transactional_id, producer_id, epoch, tp)
        if code == ErrorCode.not_coordinator:
            # the id's coordinator is another broker: the produce handler asked it first
            # (AddPartitionsToTxn v5 verify_only, KIP-890 part 1, or the implicit add of
            # version 2) for a transaction's first batch here; later ones follow it
            return ErrorCode.none
        if code == ErrorCode.producer_fenced:
            return ErrorCode.invalid_producer_epoch
        if code in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                    ErrorCode.coordinator_load_in_progress, ErrorCode.concurrent_transactions):
            return ErrorCode.not_enough_replicas
        return code
