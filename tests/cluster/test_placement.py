"""Replica placement and leader election rules, against Kafka's own documented examples."""

from __future__ import annotations

import pytest

from odradek.cluster import election
from odradek.cluster.placement import assign_replicas, rack_alternated
from odradek.protocol.errors import InvalidReplicationFactor


def test_rack_unaware_placement_matches_kafkas_example() -> None:
    brokers: dict[int, str | None] = {b: None for b in range(5)}
    got = assign_replicas(brokers, 10, 3, fixed_start=0)
    assert got == [(0, 1, 2), (1, 2, 3), (2, 3, 4), (3, 4, 0), (4, 0, 1),
                   (0, 2, 3), (1, 3, 4), (2, 4, 0), (3, 0, 1), (4, 1, 2)]


def test_rack_alternated_broker_list() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]


def test_rack_aware_placement_matches_kafkas_example() -> None:
    racks: dict[int, str | None] = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2",
                                    4: "rack2", 5: "rack1"}
    got = assign_replicas(racks, 7, 3, fixed_start=0)
    assert got == [(0, 3, 1), (3, 1, 5), (1, 5, 4), (5, 4, 2), (4, 2, 0), (2, 0, 3),
                   (0, 4, 2)]


def test_rack_aware_placement_puts_each_replica_on_its_own_rack() -> None:
    racks: dict[int, str | None] = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    for replicas in assign_replicas(racks, 24, 3):
        assert len({racks[r] for r in replicas}) == 3
    leaders = [r[0] for r in assign_replicas(racks, 24, 3)]
    assert sorted(set(leaders)) == [1, 2, 3, 4, 5, 6]
    assert all(leaders.count(b) == 4 for b in range(1, 7))


def test_some_brokers_without_rack_fall_back_to_rack_unaware() -> None:
    got = assign_replicas({1: "a", 2: None, 3: "b"}, 3, 3, fixed_start=0)
    assert [sorted(r) for r in got] == [[1, 2, 3]] * 3


def test_replication_factor_above_brokers_is_refused() -> None:
    with pytest.raises(InvalidReplicationFactor):
        assign_replicas({1: None, 2: None}, 1, 3)


def test_offline_election_picks_first_live_isr_member_in_replica_order() -> None:
    got = election.offline_partition((3, 1, 2), isr=(2, 1), live={1, 2}, unclean_enabled=False)
    assert got == election.Elected(1, (2, 1))


def test_offline_election_without_live_isr_member_is_unclean_or_nothing() -> None:
    assert election.offline_partition((1, 2), isr=(1,), live={2}, unclean_enabled=False) is None
    got = election.offline_partition((1, 2), isr=(1,), live={2}, unclean_enabled=True)
    assert got == election.Elected(2, (2,), unclean=True)


def test_last_isr_member_stays_when_its_broker_goes() -> None:
    assert election.without_replica(1, (1,), 1) == (-1, (1,))
    assert election.without_replica(1, (1, 2), 2) == (1, (1,))
    assert election.without_replica(1, (1, 2), 1) == (-1, (2,))


def test_preferred_and_reassignment_elections() -> None:
    assert election.preferred_replica((2, 1), (1, 2), {1, 2}) == election.Elected(2, (1, 2))
    assert election.preferred_replica((2, 1), (1,), {1, 2}) is None
    assert election.reassigned_partition((4, 5), (1, 5, 4), {1, 4, 5}) == \
        election.Elected(4, (5, 4))
