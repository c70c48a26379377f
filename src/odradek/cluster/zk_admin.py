"""Changes any broker (or tool) makes to the cluster by writing ZooKeeper: Kafka's AdminZkClient.

None of these elects a leader or deletes data: they write the znodes the controller
watches (a new /brokers/topics/<t>, a marker under /admin/delete_topics, …) and the
controller does the rest. Validation happens here, before anything is written, with
the same rules and errors as the embedded controller.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from odradek.cluster import topic_rules as rules
from odradek.cluster import zk_data as zd
from odradek.cluster.metadata import (
    MetadataImage,
    PartitionInfo,
    TopicInfo,
    new_topic_id,
    uuid_to_kafka,
    validate_topic_name,
)
from odradek.cluster.placement import assign_replicas
from odradek.cluster.zk_client import ZkSession, ZkTransactionFailed
from odradek.protocol.errors import (
    ErrorCode,
    InvalidPartitions,
    KafkaError,
    TopicAlreadyExists,
    TopicDeletionDisabled,
    UnknownTopicOrPartition,
)

log = logging.getLogger(__name__)


def _racks(image: MetadataImage) -> dict[int, str | None]:
    return {b.node_id: b.rack for b in image.brokers.values() if not b.fenced}


def plan_topic(
    image: MetadataImage,
    deleting: set[str],
    name: str,
    num_partitions: int,
    replication_factor: int,
    assignments: Mapping[int, Sequence[int]] | None,
    configs: Mapping[str, str | None],
    defaults: Mapping[str, object],
) -> TopicInfo:
    """The topic a CreateTopics request asks for, validated against the cluster."""
    validate_topic_name(name)
    if name in image.topics or name in deleting:
        suffix = " and is marked for deletion" if name in deleting else ""
        raise TopicAlreadyExists(f"Topic '{name}' already exists{suffix}.")
    clean = rules.validate_topic_configs(configs)
    live = _racks(image)
    replica_lists = rules.new_topic_replicas(
        assignments, num_partitions, replication_factor, defaults, live,
        lambda n, rf: assign_replicas(live, n, rf))
    rules.check_collision(name, image.topics)
    return TopicInfo(
        name=name,
        topic_id=new_topic_id(),
        partitions=tuple(PartitionInfo(p, -1, 0, r, ()) for p, r in enumerate(replica_lists)),
        configs=clean,
    )


def create_topic(zk: ZkSession, topic: TopicInfo) -> None:
    """The config and the assignment in one transaction: brokers that see the topic see
    its configs. The config znode is written even when empty, as Kafka's AdminZkClient
    does, so a controller loading 30,000 topics need not watch for missing ones."""
    assignment = zd.TopicAssignment(uuid_to_kafka(topic.topic_id),
                                    {p.partition: p.replicas for p in topic.partitions})
    config_path = zd.topic_config_path(topic.name)
    config = zd.encode_config(topic.configs)
    topic_op = ("create", zd.topic_path(topic.name), zd.encode_topic(assignment))
    try:
        zk.commit([("create", config_path, config), topic_op])
    except ZkTransactionFailed as e:
        if not isinstance(e.error, NodeExistsError):
            raise
        if e.index == 1:
            raise TopicAlreadyExists(f"Topic '{topic.name}' already exists.") from None
        # a config left by a topic deleted before (or written by a tool): replace it
        zk.create_or_set(config_path, config)
        try:
            zk.commit([topic_op])
        except ZkTransactionFailed as again:
            if isinstance(again.error, NodeExistsError):
                raise TopicAlreadyExists(f"Topic '{topic.name}' already exists.") from None
            raise
    log.info("wrote topic %s with %d partitions", topic.name, len(topic.partitions))


def delete_topic(zk: ZkSession, image: MetadataImage, name: str, enabled: bool) -> TopicInfo:
    topic = image.topics.get(name)
    if topic is None:
        raise UnknownTopicOrPartition(f"Topic '{name}' does not exist.")
    if not enabled:
        raise TopicDeletionDisabled("Topic deletion is disabled.")
    with contextlib.suppress(NodeExistsError):  # already marked: the controller is on it
        zk.create(zd.delete_topic_path(name), makepath=True)
    log.info("marked topic %s for deletion", name)
    return topic


def add_partitions(zk: ZkSession, image: MetadataImage, name: str, total: int,
                   assignments: Sequence[Sequence[int]] | None, validate_only: bool
                   ) -> TopicInfo:
    topic = image.topics.get(name)
    if topic is None:
        raise UnknownTopicOrPartition(f"Topic '{name}' does not exist.")
    current = len(topic.partitions)
    added = rules.check_partition_growth(current, total,
                                         len(assignments) if assignments else None)
    live = _racks(image)
    if assignments:
        replica_lists = [tuple(a) for a in assignments]
        rules.check_assignment(replica_lists, topic.replication_factor, live, first=current)
    else:
        replica_lists = assign_replicas(live, added, topic.replication_factor,
                                        first_partition=current)
    new_parts = tuple(PartitionInfo(current + i, -1, 0, r, ()) for i, r in
                      enumerate(replica_lists))
    updated = TopicInfo(topic.name, topic.topic_id, topic.partitions + new_parts, topic.configs)
    if validate_only:
        return updated
    found = zk.get(zd.topic_path(name))
    if found is None:
        raise UnknownTopicOrPartition(f"Topic '{name}' does not exist.")
    data, stat = found
    assignment = zd.decode_topic(data)
    if len(assignment.partitions) != current:
        raise InvalidPartitions(f"Topic '{name}' changed meanwhile; try again.")
    partitions = dict(assignment.partitions)
    partitions.update({p.partition: p.replicas for p in new_parts})
    try:
        zk.set(zd.topic_path(name), zd.encode_topic(zd.TopicAssignment(
            assignment.topic_id, partitions, assignment.adding, assignment.removing)),
            stat.version)
    except BadVersionError:
        raise InvalidPartitions(f"Topic '{name}' changed meanwhile; try again.") from None
    return updated


def set_configs(zk: ZkSession, entity_type: str, entity: str, configs: Mapping[str, str]
                ) -> None:
    """Write /config/<type>/<entity>, then a change notification as Kafka tools do (brokers
    here watch the config znode itself; Kafka brokers watch the notifications)."""
    zk.create_or_set(f"{zd.CONFIG}/{entity_type}/{entity}", zd.encode_config(configs))
    zk.create(f"{zd.CONFIG_CHANGES}/{zd.CONFIG_CHANGE_PREFIX}",
              zd.encode_config_change(f"{entity_type}/{entity}"), sequence=True, makepath=True)


def alter_entity_configs(zk: ZkSession, path: str, changes: Mapping[str, str | None]) -> None:
    """Set (None: remove) keys of one `/config/users|clients/…` znode, keeping its other
    keys (a user's SCRAM credentials), then a change notification as Kafka's
    AdminZkClient writes it. Version-checked: two brokers altering one entity at once
    both land."""
    while True:
        found = zk.get(path)
        configs = zd.decode_config(found[0]) if found is not None else {}
        for key, value in changes.items():
            if value is None:
                configs.pop(key, None)
            else:
                configs[key] = value
        try:
            if found is None:
                zk.create(path, zd.encode_config(configs), makepath=True)
            else:
                zk.set(path, zd.encode_config(configs), version=found[1].version)
            break
        except (NodeExistsError, BadVersionError):
            continue  # changed meanwhile: merge again
    zk.create(f"{zd.CONFIG_CHANGES}/{zd.CONFIG_CHANGE_PREFIX}",
              zd.encode_config_change(path.removeprefix(zd.CONFIG + "/")), sequence=True,
              makepath=True)


def next_producer_id_block(zk: ZkSession, broker: int) -> tuple[int, int]:
    """Claim the next block of producer ids: [first, last], unique in the cluster."""
    while True:
        found = zk.get(zd.PRODUCER_ID_BLOCK)
        current = zd.decode_producer_id_block(found[0]) if found else None
        first = 0 if current is None else current[1] + 1
        last = first + zd.PRODUCER_ID_BLOCK_SIZE - 1
        data = zd.encode_producer_id_block(broker, first, last)
        try:
            if found is None:
                zk.create(zd.PRODUCER_ID_BLOCK, data, makepath=True)
            else:
                zk.set(zd.PRODUCER_ID_BLOCK, data, found[1].version)
            return first, last
        except (BadVersionError, NodeExistsError):
            continue  # another broker took a block meanwhile


def request_reassignment(zk: ZkSession, image: MetadataImage,
                         moves: Mapping[tuple[str, int], Sequence[int] | None]) -> None:
    """Add (or, with None, cancel) moves in /admin/reassign_partitions for the controller.

    A cancelled move is one the controller has not finished: it is dropped from the
    znode, and the controller puts the original replicas back.
    """
    for (topic, partition), replicas in moves.items():
        info = image.topics.get(topic)
        if info is None or not 0 <= partition < len(info.partitions):
            raise UnknownTopicOrPartition(f"{topic}-{partition} does not exist.")
        if replicas is not None:
            rules.check_assignment([replicas], None, _racks(image) | {
                b: None for b in info.partitions[partition].replicas})
    while True:
        found = zk.get(zd.REASSIGN_PARTITIONS)
        pending = zd.decode_reassignment(found[0]) if found else {}
        for tp, replicas in moves.items():
            if replicas is None:
                if tp not in pending:
                    raise KafkaError(f"no reassignment of {tp[0]}-{tp[1]} is in progress",
                                     ErrorCode.no_reassignment_in_progress)
                del pending[tp]
            else:
                pending[tp] = tuple(replicas)
        data = zd.encode_reassignment(pending)
        try:
            if found is None:
                zk.create(zd.REASSIGN_PARTITIONS, data, makepath=True)
            elif pending:
                zk.set(zd.REASSIGN_PARTITIONS, data, found[1].version)
            else:
                zk.delete(zd.REASSIGN_PARTITIONS, found[1].version)
            return
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue


def pending_reassignments(zk: ZkSession) -> dict[tuple[str, int], tuple[int, ...]]:
    found = zk.get(zd.REASSIGN_PARTITIONS)
    return zd.decode_reassignment(found[0]) if found else {}


def request_preferred_election(zk: ZkSession, partitions: set[tuple[str, int]]) -> None:
    """Ask for preferred leaders; merged into a pending request if there is one."""
    while True:
        found = zk.get(zd.PREFERRED_REPLICA_ELECTION)
        pending = zd.decode_partitions(found[0]) if found else set()
        data = zd.encode_partitions(pending | partitions)
        try:
            if found is None:
                zk.create(zd.PREFERRED_REPLICA_ELECTION, data, makepath=True)
            else:
                zk.set(zd.PREFERRED_REPLICA_ELECTION, data, found[1].version)
            return
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue


def ongoing_reassignments(image: MetadataImage, pending: Mapping[tuple[str, int], Sequence[int]]
                          ) -> dict[tuple[str, int], PartitionInfo]:
    """Partitions with replicas being added or removed, and the `pending` moves of
    /admin/reassign_partitions the controller has not started yet."""
    out: dict[tuple[str, int], PartitionInfo] = {}
    for topic in image.topics.values():
        for p in topic.partitions:
            if p.adding_replicas or p.removing_replicas:
                out[(topic.name, p.partition)] = p
    for (name, index), target in pending.items():
        info = image.topics.get(name)
        if (name, index) in out or info is None or index >= len(info.partitions):
            continue
        current = info.partitions[index]
        adding = tuple(r for r in target if r not in current.replicas)
        removing = tuple(r for r in current.replicas if r not in target)
        out[(name, index)] = replace(current, adding_replicas=adding,
                                     removing_replicas=removing)
    return out
