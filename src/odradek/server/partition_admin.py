"""Leader elections and replica reassignments for the admin APIs (ElectLeaders,
AlterPartitionReassignments, ListPartitionReassignments), on either metadata backend.

With ZooKeeper an election runs on the active controller's thread (the request must
reach the controller, as in Kafka; elsewhere NOT_CONTROLLER sends the client to it),
and a reassignment is written to /admin/reassign_partitions, which any broker may do —
the controller carries it out. A single embedded broker leads every partition and has
no other broker to move replicas to: elections are never needed there, and the only
valid "reassignment" is to the replicas a partition already has.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from odradek.cluster.metadata import MetadataImage, PartitionInfo
from odradek.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.server.broker import Broker

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


async def elect_leaders(broker: Broker, election: int, tps: Sequence[TopicPartition],
                        timeout_s: float) -> dict[TopicPartition, Outcome]:
    """Raises KafkaError(NOT_CONTROLLER) when this broker cannot run elections."""
    image = broker.controller.image
    out: dict[TopicPartition, Outcome] = {}
    todo = []
    for tp in tps:
        early = _precheck(image, tp, election)
        if early is not None:
            out[tp] = early
        else:
            todo.append(tp)
    zk = broker.zk
    if not todo or zk is None:
        return out  # a single broker leads everything: every election was answered
    controller = zk.controller
    if controller is None or not controller.active:
        raise KafkaError("this broker is not the controller", ErrorCode.not_controller)
    states = controller.states
    run = states.elect_preferred if election == PREFERRED else states.elect_unclean
    try:
        written = await asyncio.wait_for(
            asyncio.wrap_future(controller.call(lambda: run(todo))), timeout_s)
    except TimeoutError:
        raise KafkaError("the election did not finish in time",
                         ErrorCode.request_timed_out) from None
    except Exception as e:
        raise KafkaError(str(e), ErrorCode.not_controller) from e
    failed = (ErrorCode.preferred_leader_not_available if election == PREFERRED
              else ErrorCode.eligible_leaders_not_available)
    for tp in todo:
        out[tp] = (ErrorCode.none, None) if tp in written else (failed, "no eligible leader")
    return out


def alter_reassignment(broker: Broker, tp: TopicPartition, replicas: Sequence[int] | None
                       ) -> Outcome:
    """Start (or with None cancel) one partition's move."""
    p = _find(broker.controller.image, tp)
    if p is None:
        return ErrorCode.unknown_topic_or_partition, f"{tp[0]}-{tp[1]} does not exist"
    zk = broker.zk
    if zk is None:
        if replicas is None:
            return ErrorCode.no_reassignment_in_progress, "no reassignment is in progress"
        if tuple(replicas) == p.replicas:
            return ErrorCode.none, None
        return (ErrorCode.invalid_replica_assignment,
                f"a single broker has no broker other than {broker.node_id} to move to")
    if replicas is not None and (not replicas or len(set(replicas)) != len(replicas)
                                 or any(r not in broker.controller.image.brokers
                                        and r not in p.replicas for r in replicas)):
        return ErrorCode.invalid_replica_assignment, f"invalid replicas {list(replicas)}"
    try:
        zk.alter_reassignments({tp: replicas})
    except KafkaError as e:
        return e.code, str(e)
    return ErrorCode.none, None


def ongoing_reassignments(broker: Broker, wanted: Iterable[TopicPartition] | None
                          ) -> dict[TopicPartition, PartitionInfo]:
    zk = broker.zk
    if zk is None:
        return {}
    ongoing = zk.list_reassignments()
    if wanted is None:
        return ongoing
    return {tp: ongoing[tp] for tp in wanted if tp in ongoing}
