"""The MetadataImage a ZooKeeper-mode broker builds from the znodes it read, and what changed
between two images (the listeners' events). Pure functions over values."""

from __future__ import annotations

from collections.abc import Mapping

from odradek.cluster import zk_data as zd
from odradek.cluster.metadata import (
    BrokerInfo,
    MetadataImage,
    PartitionInfo,
    TopicInfo,
    kafka_to_uuid,
)

TopicPartition = tuple[str, int]


def build_topic(name: str, assignment: zd.TopicAssignment,
                states: Mapping[TopicPartition, zd.LeaderAndIsr], configs: Mapping[str, str],
                live: Mapping[int, BrokerInfo], fenced_node: int | None) -> TopicInfo | None:
    """One topic's entry; None for a topic an old tool wrote without an id (the controller
    gives it one). A leader that is not registered is no leader (-1): the controller will
    move the partition. `fenced_node` is this broker when it lost ZooKeeper: the
    controller has (or will have) moved its leaderships, so its own image must not claim
    them."""
    if assignment.topic_id is None:
        return None
    parts = []
    for p, replicas in sorted(assignment.partitions.items()):
        state = states.get((name, p))
        leader = state.leader if state is not None and state.leader in live else -1
        if leader == fenced_node:
            leader = -1
        parts.append(PartitionInfo(
            partition=p,
            leader=leader,
            leader_epoch=state.leader_epoch if state is not None else 0,
            replicas=replicas,
            isr=state.isr if state is not None else (),
            partition_epoch=state.zk_version if state is not None else -1,
            offline_replicas=tuple(r for r in replicas if r not in live),
            adding_replicas=assignment.adding.get(p, ()),
            removing_replicas=assignment.removing.get(p, ()),
            controller_epoch=state.controller_epoch if state is not None else 0,
        ))
    return TopicInfo(name, kafka_to_uuid(assignment.topic_id), tuple(parts), dict(configs))


def build_image(cluster_id: str, brokers: Mapping[int, BrokerInfo],
                topics: Mapping[str, TopicInfo], broker_configs: Mapping[str, str],
                controller_id: int) -> MetadataImage:
    """The image of the topics' entries (built by `build_topic`), sorted by name."""
    live = dict(sorted(brokers.items()))
    return MetadataImage(
        cluster_id=cluster_id,
        controller_id=controller_id if controller_id in live else -1,
        brokers=live,
        topics={name: topics[name] for name in sorted(topics)},
        broker_configs=dict(broker_configs),
    )


def diff_events(old: MetadataImage, new: MetadataImage) -> list[tuple[str, str]]:
    """What changed, as the listeners' events: created/deleted/partitions/configs per
    topic, partition-state (leaders, ISRs, replicas), broker-configs, brokers, controller."""
    events: list[tuple[str, str]] = []
    for name in old.topics:
        if name not in new.topics:
            events.append(("deleted", name))
    for name, after in new.topics.items():
        before = old.topics.get(name)
        if before is after:
            continue  # an entry is rebuilt only when its topic changed (zk_cache.py)
        if before is None:
            events.append(("created", name))
            continue
        if before.topic_id != after.topic_id:
            events += [("deleted", name), ("created", name)]
            continue
        if len(after.partitions) > len(before.partitions):
            events.append(("partitions", name))
        if before.configs != after.configs:
            events.append(("configs", name))
        if before.partitions != after.partitions[: len(before.partitions)]:
            events.append(("partition-state", name))
    if old.broker_configs != new.broker_configs:
        events.append(("broker-configs", ""))
    if old.client_quotas != new.client_quotas:
        events.append(("client-quotas", ""))
    if old.user_configs != new.user_configs:
        events.append(("user-configs", ""))
    if old.acls != new.acls:
        events.append(("acls", ""))
    if old.brokers != new.brokers:
        events.append(("brokers", ""))
    if old.controller_id != new.controller_id:
        events.append(("controller", ""))
    return events
