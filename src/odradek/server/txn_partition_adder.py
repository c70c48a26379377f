"""Transaction version 2's implicit add (KIP-890 part 2): a partition leader adds a
partition to its producer's transaction before taking the producer's write.

A Produce v12 or TxnOffsetCommit v5 client never sends AddPartitionsToTxn. The broker
that takes the write asks the transactional id's coordinator to add the partitions:
itself when it leads the id's `__transaction_state` partition, otherwise with
AddPartitionsToTxn v5 (`verify_only` false), the batched form brokers send each other —
what Kafka's AddPartitionsToTxnManager does. Kafka's error translation follows: a
fenced producer hears INVALID_PRODUCER_EPOCH, a coordinator that cannot be reached
NETWORK_EXCEPTION (the callers turn the retriable ones into their API's retriable
error).

Before version 2 (KIP-890 part 1) the same channel verifies instead (`verify_only`
true): is the partition in the producer's ongoing transaction? A partition leader asks
before taking a transaction's first batch when the coordinator is another broker.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from odradek.coordinator.txn import TRANSACTION_STATE_TOPIC, TransactionCoordinator
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import request_class
from odradek.server.broker_channels import BrokerChannels

if TYPE_CHECKING:
    from odradek.server.core import BrokerCore

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
ADD_PARTITIONS_TO_TXN = 24
VERSION = 5
TV2 = 2
TIMEOUT_S = 30.0  # Kafka's request.timeout.ms for the inter-broker channel
_NOT_HERE = frozenset({ErrorCode.not_coordinator})


class PartitionAdder:
    def __init__(self, broker: BrokerCore, coordinator: TransactionCoordinator) -> None:
        self.broker = broker
        self.coordinator = coordinator
        self.channels = BrokerChannels(broker, "txn-add", TIMEOUT_S)

    async def add(self, transactional_id: str, producer_id: int, epoch: int,
                  partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Add the partitions to the producer's transaction: {partition: error}, NONE
        for each one now in it."""
        tps = sorted(set(partitions))
        code = await self.coordinator.add_partitions(transactional_id, producer_id, epoch,
                                                set(tps), client_transaction_version=TV2)
        if code in _NOT_HERE:
            return await self._remote(transactional_id, producer_id, epoch, tps)
        return dict.fromkeys(tps, _translate(code))

    async def verify(self, transactional_id: str, producer_id: int, epoch: int,
                     partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Are the partitions in the producer's ongoing transaction? {partition: error}.
        Asked of a coordinator on another broker (the local one answers at once)."""
        tps = sorted(set(partitions))
        return await self._remote(transactional_id, producer_id, epoch, tps, verify_only=True)

    def _coordinator_node(self, transactional_id: str) -> int:
        image = self.broker.controller.image
        topic = image.topics.get(TRANSACTION_STATE_TOPIC)
        partition = self.coordinator.partition_for(transactional_id)
        if topic is None or partition >= len(topic.partitions):
            return -1
        return topic.partitions[partition].leader

    async def _remote(self, transactional_id: str, producer_id: int, epoch: int,
                      tps: list[TopicPartition], verify_only: bool = False
                      ) -> dict[TopicPartition, ErrorCode]:
        node = self._coordinator_node(transactional_id)
        entry = None if node in (-1, self.broker.node_id) else self.channels.get(node)
        if entry is None:
            return dict.fromkeys(tps, ErrorCode.coordinator_not_available)
        channel, lock = entry
        module = sys.modules[request_class(ADD_PARTITIONS_TO_TXN, VERSION).__module__]
        by_topic: dict[str, list[int]] = {}
        for topic, index in tps:
            by_topic.setdefault(topic, []).append(index)
        body = module.AddPartitionsToTxnRequest(transactions=(
            module.AddPartitionsToTxnTransaction(
                transactional_id=transactional_id, producer_id=producer_id,
                producer_epoch=epoch, verify_only=verify_only,
                topics=tuple(module.AddPartitionsToTxnTopic(name=t, partitions=tuple(ps))
                             for t, ps in by_topic.items())),))
        try:
            async with lock:
                response: Any = await channel.call(ADD_PARTITIONS_TO_TXN, VERSION, body)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as e:
            log.info("AddPartitionsToTxn to broker %d failed: %s", node, e)
            return dict.fromkeys(tps, ErrorCode.network_exception)
        if response.error_code != ErrorCode.none:
            top = ErrorCode(response.error_code)
            # a client must not see the brokers' own authorization failure
            return dict.fromkeys(tps, ErrorCode.invalid_txn_state
                                 if top == ErrorCode.cluster_authorization_failed else top)
        out: dict[TopicPartition, ErrorCode] = {}
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    out[(topic.name, p.partition_index)] = _translate(
                        ErrorCode(p.partition_error_code))
        return {tp: out.get(tp, ErrorCode.network_exception) for tp in tps}

    def close(self) -> None:
        self.channels.close()


def _translate(code: ErrorCode) -> ErrorCode:
    # producers expect INVALID_PRODUCER_EPOCH from a partition leader (Kafka's
    # AddPartitionsToTxnManager says the same)
    return ErrorCode.invalid_producer_epoch if code == ErrorCode.producer_fenced else code
