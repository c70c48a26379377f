"""Server-side assignors of the consumer protocol (KIP-848): `uniform` and `range`.

Both are pure functions of the members' subscriptions, the topics' partition counts
and the previous target assignment; `uniform` keeps partitions where they are as long
as the balance allows (a member never owns two more than another eligible one).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

Assignment = dict[uuid.UUID, set[int]]  # topic id → partitions
TopicPartitionId = tuple[uuid.UUID, int]


def _flatten(assignment: Assignment) -> set[TopicPartitionId]:
    return {(t, p) for t, parts in assignment.items() for p in parts}


def _nest(tps: set[TopicPartitionId]) -> Assignment:
    out: Assignment = {}
    for t, p in tps:
        out.setdefault(t, set()).add(p)
    return out


def uniform(subscriptions: Mapping[str, set[uuid.UUID]], partitions: Mapping[uuid.UUID, int],
            previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Spread the partitions evenly, sticking to the previous owners where possible."""
    members = sorted(subscriptions)
    eligible: dict[TopicPartitionId, list[str]] = {}
    for t, count in partitions.items():
        subscribers = [m for m in members if t in subscriptions[m]]
        if subscribers:
            for p in range(count):
                eligible[(t, p)] = subscribers
    if not members:
        return {}
    owned: dict[str, set[TopicPartitionId]] = {m: set() for m in members}
    cap = -(-len(eligible) // max(1, sum(1 for m in members if subscriptions[m])))
    for m in members:
        kept = sorted(tp for tp in _flatten(previous.get(m, {})) if m in eligible.get(tp, ()))
        owned[m].update(kept[:cap])
    taken = {tp for parts in owned.values() for tp in parts}
    rest = sorted((tp for tp in eligible if tp not in taken),
                  key=lambda tp: (len(eligible[tp]), str(tp[0]), tp[1]))
    for tp in rest:
        target = min(eligible[tp], key=lambda m: (len(owned[m]), m))
        owned[target].add(tp)
    # Heterogeneous subscriptions can leave one member far ahead: move partitions to a
    # less loaded eligible member until no move narrows the gap.
    for _ in range(len(eligible) + 1):
        moved = False
        for donor in sorted(members, key=lambda m: -len(owned[m])):
            for tp in sorted(owned[donor], key=lambda tp: (str(tp[0]), tp[1])):
                best = min(eligible[tp], key=lambda m: (len(owned[m]), m))
                if len(owned[donor]) - len(owned[best]) > 1:
                    owned[donor].discard(tp)
                    owned[best].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    return {m: _nest(owned[m]) for m in members}


def range_(subscriptions: Mapping[str, set[uuid.UUID]], partitions: Mapping[uuid.UUID, int],
           previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Per topic, contiguous ranges of partitions to the subscribers in member-id order."""
    out: dict[str, Assignment] = {m: {} for m in subscriptions}
    for t, count in partitions.items():
        subscribers = sorted(m for m in subscriptions if t in subscriptions[m])
        if not subscribers:
            continue
        per, extra = divmod(count, len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            n = per + (1 if i < extra else 0)
            if n:
                out[m][t] = set(range(start, start + n))
            start += n
    return out


ASSIGNORS = {"uniform": uniform, "range": range_}
