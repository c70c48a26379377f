"""Transaction markers for partitions led by other brokers: WriteTxnMarkers to each leader.

The coordinator hands over every partition of a transaction at once; those this broker
leads are written locally, the others are grouped by leader and sent one request per
leader, all leaders at once — what Kafka's TransactionMarkerChannelManager does. A
leader that is unknown, unreachable or late answers NOT_LEADER_OR_FOLLOWER /
REQUEST_TIMED_OUT for its partitions, which the coordinator retries with a backoff.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import request_class
from odradek.server.broker_channels import BrokerChannels

if TYPE_CHECKING:
    from odradek.server.core import BrokerCore

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
WRITE_TXN_MARKERS = 27
VERSION = 1
TIMEOUT_S = 30.0  # Kafka's request.timeout.ms for the marker channel
UNKNOWN = -2


class RemoteMarkers:
    def __init__(self, broker: BrokerCore) -> None:
        self.broker = broker
        self.channels = BrokerChannels(broker, "txn-markers", TIMEOUT_S)

    def leader_of(self, tp: TopicPartition) -> int:
        """The partition's leader; -1 while it has none, -2 for no such partition."""
        topic = self.broker.controller.image.topics.get(tp[0])
        if topic is None or not 0 <= tp[1] < len(topic.partitions):
            return UNKNOWN
        return topic.partitions[tp[1]].leader

    async def write(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                    commit: bool, by_leader: dict[int, list[TopicPartition]]
                    ) -> dict[TopicPartition, ErrorCode]:
        out: dict[TopicPartition, ErrorCode] = dict.fromkeys(
            by_leader.pop(-1, ()), ErrorCode.leader_not_available)
        answers = await asyncio.gather(*(
            self._send(leader, producer_id, producer_epoch, coordinator_epoch, commit, tps)
            for leader, tps in by_leader.items()))
        for answer in answers:
            out.update(answer)
        return out

    async def _send(self, leader: int, producer_id: int, producer_epoch: int,
                    coordinator_epoch: int, commit: bool, tps: list[TopicPartition]
                    ) -> dict[TopicPartition, ErrorCode]:
        failed = dict.fromkeys(tps, ErrorCode.not_leader_or_follower)
        entry = self.channels.get(leader)
        if entry is None:
            return failed
        channel, lock = entry
        module = sys.modules[request_class(WRITE_TXN_MARKERS, VERSION).__module__]
        by_topic: dict[str, list[int]] = {}
        for topic, index in tps:
            by_topic.setdefault(topic, []).append(index)
        body = module.WriteTxnMarkersRequest(markers=(module.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            coordinator_epoch=coordinator_epoch,
            topics=tuple(module.WritableTxnMarkerTopic(name=t, partition_indexes=tuple(ps))
                         for t, ps in by_topic.items())),))
        try:
            async with lock:
                response: Any = await channel.call(WRITE_TXN_MARKERS, VERSION, body)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as e:
            log.info("WriteTxnMarkers to broker %d failed: %s", leader, e)
            return dict.fromkeys(tps, ErrorCode.request_timed_out)
        out: dict[TopicPartition, ErrorCode] = {}
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    out[(topic.name, p.partition_index)] = ErrorCode(p.error_code)
        return {tp: out.get(tp, failed[tp]) for tp in tps}

    def close(self) -> None:
        self.channels.close()


def split_by_leader(partitions: Iterable[TopicPartition], local_id: int,
                    leader_of: Callable[[TopicPartition], int]
                    ) -> tuple[list[TopicPartition], dict[int, list[TopicPartition]]]:
    """(partitions to write here, {other leader: its partitions}). Unknown partitions
    stay local, where they get the replica manager's UNKNOWN_TOPIC_OR_PARTITION; those
    without a leader right now go under -1 (retried until one is elected)."""
    local: list[TopicPartition] = []
    remote: dict[int, list[TopicPartition]] = {}
    for tp in partitions:
        leader = leader_of(tp)
        if leader in (UNKNOWN, local_id):
            local.append(tp)
        else:
            remote.setdefault(leader, []).append(tp)
    return local, remote
