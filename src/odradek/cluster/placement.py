"""Replica placement for new topics and partitions: Kafka's AdminUtils algorithm.

Without racks: the first replica of partition p goes to broker (p + start) mod n, the
others follow at a shift that grows every n partitions, so leaders spread evenly and
the followers of one broker's partitions spread over the others. With `broker.rack`
on every broker, the brokers are first listed alternating racks (r1b1, r2b1, r3b1,
r1b2, …) and a replica is skipped while a rack or a broker without a replica is left,
so each partition's replicas span as many racks as they can.

The start index and shift are random in Kafka (so topics do not all start on broker
0); tests pass `fixed_start` to get Kafka's documented examples.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from odradek.protocol.errors import InvalidReplicationFactor


def assign_replicas(
    brokers: Mapping[int, str | None],
    num_partitions: int,
    replication_factor: int,
    *,
    first_partition: int = 0,
    fixed_start: int = -1,
) -> list[tuple[int, ...]]:
    """Replica lists for partitions first_partition .. first_partition+num_partitions-1.

    `brokers` maps each live broker id to its rack (None when it has none). Racks are
    used when every broker has one; with some racks missing Kafka's "safe" mode falls
    back to rack-unaware placement, and so do we.
    """
    if num_partitions <= 0:
        return []
    if replication_factor <= 0:
        raise InvalidReplicationFactor("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactor(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}."
        )
    if all(rack is not None for rack in brokers.values()):
        racks = {b: str(r) for b, r in brokers.items()}
        return _rack_aware(racks, num_partitions, replication_factor, first_partition,
                           fixed_start)
    return _rack_unaware(sorted(brokers), num_partitions, replication_factor, first_partition,
                         fixed_start)


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def _start(fixed_start: int, n: int) -> tuple[int, int]:
    if fixed_start >= 0:
        return fixed_start, fixed_start
    return random.randrange(n), random.randrange(n)


def _rack_unaware(brokers: list[int], num_partitions: int, rf: int, first_partition: int,
                  fixed_start: int) -> list[tuple[int, ...]]:
    n = len(brokers)
    start, shift = _start(fixed_start, n)
    out = []
    for p in range(first_partition, first_partition + num_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [brokers[first]]
        replicas += [brokers[_replica_index(first, shift, j, n)] for j in range(rf - 1)]
        out.append(tuple(replicas))
    return out


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Brokers listed one per rack in turn, racks and brokers in sorted order."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    iterators = [iter(by_rack[r]) for r in sorted(by_rack)]
    out: list[int] = []
    i = 0
    while len(out) < len(racks):
        nxt = next(iterators[i], None)
        if nxt is not None:
            out.append(nxt)
        i = (i + 1) % len(iterators)
    return out


def _rack_aware(racks: Mapping[int, str], num_partitions: int, rf: int, first_partition: int,
                fixed_start: int) -> list[tuple[int, ...]]:
    arranged = rack_alternated(racks)
    n = len(arranged)
    num_racks = len(set(racks.values()))
    start, shift = _start(fixed_start, n)
    out = []
    for p in range(first_partition, first_partition + num_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {racks[leader]}
        brokers_used = {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                broker = arranged[_replica_index(first, shift * num_racks, k, n)]
                rack = racks[broker]
                k += 1
                # skip a rack that has a replica while another has none, and a broker
                # that has one while another has none
                if ((rack not in racks_used or len(racks_used) == num_racks)
                        and (broker not in brokers_used or len(brokers_used) == n)):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        out.append(tuple(replicas))
    return out
