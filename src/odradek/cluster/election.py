"""Leader election rules, as Kafka's controller applies them (PartitionLeaderElectionAlgorithms).

Pure functions over a partition's assignment (in replica order), its ISR and the live
brokers; the controller writes what they return into the partition's state znode.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Elected:
    leader: int
    isr: tuple[int, ...]
    unclean: bool = False  # an out-of-sync replica took over: writes may be lost


def offline_partition(assignment: Sequence[int], isr: Sequence[int], live: Collection[int],
                      unclean_enabled: bool) -> Elected | None:
    """A partition without a live leader: the first live replica that is in the ISR, in
    replica order; with `unclean.leader.election.enable`, any live replica when no ISR
    member is alive — it leads alone, and what only the old ISR had is lost."""
    for replica in assignment:
        if replica in live and replica in isr:
            return Elected(replica, tuple(r for r in isr if r in live))
    if unclean_enabled:
        for replica in assignment:
            if replica in live:
                return Elected(replica, (replica,), unclean=True)
    return None


def reassigned_partition(target: Sequence[int], isr: Sequence[int], live: Collection[int]
                         ) -> Elected | None:
    """The end of a reassignment: the first live, in-sync replica of the new assignment."""
    for replica in target:
        if replica in live and replica in isr:
            return Elected(replica, tuple(r for r in isr if r in target))
    return None


def preferred_replica(assignment: Sequence[int], isr: Sequence[int], live: Collection[int]
                      ) -> Elected | None:
    """The preferred (first) replica, only when it is alive and in sync."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return Elected(assignment[0], tuple(isr))
    return None


def controlled_shutdown(assignment: Sequence[int], isr: Sequence[int], live: Collection[int],
                        shutting_down: Collection[int]) -> Elected | None:
    """A broker leaving cleanly: lead elsewhere, and leave it out of the ISR."""
    for replica in assignment:
        if replica in live and replica in isr and replica not in shutting_down:
            return Elected(replica, tuple(r for r in isr if r not in shutting_down))
    return None


def without_replica(leader: int, isr: Sequence[int], replica: int) -> tuple[int, tuple[int, ...]]:
    """(leader, ISR) once `replica` is offline: it leaves the ISR unless it is the last
    member — Kafka keeps the last one so that a clean election can pick it when it
    returns — and a leader that went offline leaves the partition leaderless (-1)."""
    new_isr = tuple(isr) if len(isr) <= 1 else tuple(r for r in isr if r != replica)
    return (-1 if leader == replica else leader), new_isr
