"""Leader elections and replica reassignments for the admin APIs (ElectLeaders,
AlterPartitionReassignments, ListPartitionReassignments), on either metadata backend.

What is the same on both backends (which partitions need no election, unknown
partitions) is decided here; the metadata port does the rest: with ZooKeeper on the
active controller and through /admin/reassign_partitions, on a single embedded broker —
which leads every partition and has no other broker to move replicas to — nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from odradek.cluster.metadata import MetadataImage, PartitionInfo
from odradek.cluster.topic_rules import check_assignment
from odradek.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.cluster.controller import MetadataController

TopicPartition = tuple[str, int]
PREFERRED, UNCLEAN = 0, 1
Outcome = tuple[ErrorCode, str | None]


def _find(image: MetadataImage, tp: TopicPartition) -> PartitionInfo | None:
    topic = image.topics.get(tp[0])
    if topic is None or not 0 <= tp[1] < len(topic.partitions):
        return None
    return topic.partitions[tp[1]]


def all_partitions(image: MetadataImage) -> list[TopicPartition]:
    return [(t.name, p.partition) for t in image.topics.values() for p in t.partitions]


def _precheck(image: MetadataImage, tp: TopicPartition, election: int) -> Outcome | None:
    """Kafka's answers that need no election; None when one should be tried."""
    p = _find(image, tp)
    if p is None:
        return ErrorCode.unknown_topic_or_partition, f"{tp[0]}-{tp[1]} does not exist"
    live = image.brokers
    if election == PREFERRED:
        if p.replicas and p.leader == p.replicas[0]:
            return ErrorCode.election_not_needed, None
        if not p.replicas or p.replicas[0] not in live or p.replicas[0] not in p.isr:
            return (ErrorCode.preferred_leader_not_available,
                    f"preferred replica {p.replicas[:1]} is not alive and in sync")
        return None
    if p.leader in live:
        return ErrorCode.election_not_needed, None
    if not any(r in live for r in p.replicas):
        return ErrorCode.eligible_leaders_not_available, "no replica is alive"
    return None


async def elect_leaders(metadata: MetadataController, election: int,
                        tps: Sequence[TopicPartition], timeout_s: float
                        ) -> dict[TopicPartition, Outcome]:
    """Raises KafkaError(NOT_CONTROLLER) when this broker cannot run elections."""
    image = metadata.image
    out: dict[TopicPartition, Outcome] = {}
    todo = []
    for tp in tps:
        early = _precheck(image, tp, election)
        if early is not None:
            out[tp] = early
        else:
            todo.append(tp)
    if not todo:
        return out
    written = await metadata.run_elections(election, todo, timeout_s)
    failed = (ErrorCode.preferred_leader_not_available if election == PREFERRED
              else ErrorCode.eligible_leaders_not_available)
    for tp in todo:
        out[tp] = (ErrorCode.none, None) if tp in written else (failed, "no eligible leader")
    return out


async def alter_reassignment(metadata: MetadataController, tp: TopicPartition,
                             replicas: Sequence[int] | None) -> Outcome:
    """Start (or with None cancel) one partition's move."""
    p = _find(metadata.image, tp)
    if p is None:
        return ErrorCode.unknown_topic_or_partition, f"{tp[0]}-{tp[1]} does not exist"
    try:
        if replicas is not None:
            # Kafka's checks of a manual assignment, its messages too; a replica already
            # on a broker that is down may stay where it is
            check_assignment([replicas], None, {*metadata.image.brokers, *p.replicas},
                             first=tp[1])
        await metadata.alter_reassignment(tp, p, replicas)
    except KafkaError as e:
        return e.code, str(e)
    return ErrorCode.none, None


async def ongoing_reassignments(metadata: MetadataController,
                                wanted: Iterable[TopicPartition] | None
                                ) -> dict[TopicPartition, PartitionInfo]:
    ongoing = await metadata.list_reassignments()
    if wanted is None:
        return ongoing
    return {tp: ongoing[tp] for tp in wanted if tp in ongoing}
