"""What a topic change must satisfy, the same for both metadata backends.

The embedded controller (controller.py) and the ZooKeeper admin (zk_admin.py) refuse
the same requests with the same Kafka errors and messages.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from odradek.configdef import ConfigError
from odradek.protocol.errors import (
    InvalidConfig,
    InvalidPartitions,
    InvalidReplicaAssignment,
    InvalidReplicationFactor,
    InvalidRequest,
    InvalidTopic,
)
from odradek.storage.log_config import TOPIC_CONFIGS


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    clean: dict[str, str] = {}
    for name, value in configs.items():
        if name not in TOPIC_CONFIGS:
            raise InvalidConfig(f"Unknown topic config name: {name}")
        if value is None:
            raise InvalidConfig(f"Null value not supported for topic config {name}")
        try:
            TOPIC_CONFIGS[name].parse(value)
        except ConfigError as e:
            raise InvalidConfig(str(e)) from None
        clean[name] = str(value)
    return clean


def check_assignment(assignment: Iterable[Sequence[int]], rf: int | None,
                     known: Collection[int], first: int = 0) -> None:
    """Each replica list non-empty, without duplicates, of one size (`rf` when given), on
    known brokers: else INVALID_REPLICA_ASSIGNMENT with Kafka's message (partitions are
    numbered from `first`)."""
    for index, replicas in enumerate(assignment, start=first):
        if not replicas:
            raise InvalidReplicaAssignment(
                "The manual partition assignment includes an empty replica list.")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignment(
                f"The manual partition assignment includes the partition {index} with "
                f"duplicate replicas {list(replicas)}.")
        if rf is None:
            rf = len(replicas)
        elif len(replicas) != rf:
            raise InvalidReplicaAssignment(
                f"The manual partition assignment includes a partition with "
                f"{len(replicas)} replica(s), but this is not consistent with previous "
                f"partitions, which have {rf} replica(s).")
        for broker in replicas:
            if broker not in known:
                raise InvalidReplicaAssignment(
                    f"The manual partition assignment includes broker {broker}, but no "
                    "such broker is registered.")


def check_consecutive(assignments: Mapping[int, Sequence[int]]) -> None:
    if sorted(assignments) != list(range(len(assignments))):
        raise InvalidPartitions("Partitions should be consecutive, starting from 0")


def check_collision(name: str, existing: Iterable[str]) -> None:
    """'a.b' and 'a_b' share metric names in Kafka: one of them only."""
    colliding = [t for t in existing if t.replace(".", "_") == name.replace(".", "_")]
    if colliding:
        raise InvalidTopic(
            f"Topic '{name}' collides with existing topic: {colliding[0]}: topics with a "
            "period ('.') or underscore ('_') could collide"
        )


def check_partition_growth(current: int, total: int, given: int | None) -> int:
    """How many partitions to add; `given` is the number of explicit assignments."""
    if total < current:
        raise InvalidPartitions(
            f"Topic currently has {current} partitions, which is higher than the "
            f"requested {total}."
        )
    if total == current:
        raise InvalidPartitions(f"Topic already has {current} partitions.")
    added = total - current
    if given is not None and given != added:
        raise InvalidRequest(
            f"Increasing the number of partitions by {added} but {given} "
            "assignments provided."
        )
    return added


def new_topic_replicas(
    assignments: Mapping[int, Sequence[int]] | None,
    num_partitions: int,
    replication_factor: int,
    defaults: Mapping[str, object],
    known: Collection[int],
    assign: Callable[[int, int], list[tuple[int, ...]]],
    cap_default_rf: bool = False,
) -> list[tuple[int, ...]]:
    """A CreateTopics request's replica lists: the explicit assignment, validated, or
    `assign(partitions, rf)` with -1 meaning the broker defaults. `cap_default_rf` caps a
    defaulted replication factor at the known brokers (the embedded single broker)."""
    if assignments:
        if num_partitions != -1 or replication_factor != -1:
            raise InvalidRequest(
                "Both numPartitions or replicationFactor and replicasAssignments were set."
            )
        check_consecutive(assignments)
        replica_lists = [tuple(assignments[p]) for p in range(len(assignments))]
        check_assignment(replica_lists, None, known)
        return replica_lists
    if num_partitions == -1:
        num_partitions = int(str(defaults.get("num.partitions", 1)))
    if replication_factor == -1:
        replication_factor = int(str(defaults.get("default.replication.factor", 1)))
        if cap_default_rf:
            replication_factor = min(replication_factor, len(known))
    if num_partitions <= 0:
        raise InvalidPartitions("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactor("Replication factor must be larger than 0.")
    return assign(num_partitions, replication_factor)
