"""Offset planning: rate limits, range splitting, data loss — pure functions."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from odradek.pipeline.offsets import (
    OffsetRange,
    cap,
    clamp_to_available,
    find_data_loss,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    rate_limit,
)

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def test_offsets_json_is_sparks_format_and_round_trips() -> None:
    offsets = {A0: 5, A1: 7, B0: 0}
    as_json = offsets_to_json(offsets)
    assert as_json == {"a": {"0": 5, "1": 7}, "b": {"0": 0}}
    assert offsets_from_json(as_json) == offsets


def test_rate_limit_shares_the_budget_by_lag() -> None:
    end = rate_limit({A0: 0, A1: 0}, {A0: 900, A1: 100}, 100)
    assert end == {A0: 90, A1: 10}
    assert rate_limit({A0: 0}, {A0: 50}, 100) == {A0: 50}


@given(st.dictionaries(st.sampled_from([A0, A1, B0]), st.integers(0, 10_000), min_size=1),
       st.integers(1, 5_000))
def test_rate_limit_admits_exactly_the_budget_and_never_passes_the_end(
        lags: dict[tuple[str, int], int], budget: int) -> None:
    start = {tp: 100 for tp in lags}
    latest = {tp: 100 + lag for tp, lag in lags.items()}
    end = rate_limit(start, latest, budget)
    admitted = sum(end[tp] - start[tp] for tp in lags)
    assert admitted == min(budget, sum(lags.values()))
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in lags)


def test_min_partitions_splits_big_partitions_in_proportion() -> None:
    ranges = plan_ranges({A0: 0, A1: 0}, {A0: 300, A1: 100}, min_partitions=4)
    assert [r for r in ranges if r.partition == 0] == [
        OffsetRange("a", 0, 0, 100), OffsetRange("a", 0, 100, 200), OffsetRange("a", 0, 200, 300)]
    assert [r for r in ranges if r.partition == 1] == [OffsetRange("a", 1, 0, 100)]


@given(st.lists(st.integers(0, 1_000), min_size=1, max_size=5), st.integers(1, 20))
def test_split_ranges_cover_every_offset_once(sizes: list[int], min_partitions: int) -> None:
    start = {("t", i): 10 for i in range(len(sizes))}
    end = {("t", i): 10 + n for i, n in enumerate(sizes)}
    ranges = plan_ranges(start, end, min_partitions)
    covered = sorted((r.partition, o) for r in ranges for o in range(r.start, r.end))
    assert covered == sorted((i, o) for i, n in enumerate(sizes) for o in range(10, 10 + n))


def test_data_loss_names_the_lost_range() -> None:
    losses = find_data_loss({A0: 5, A1: 50}, {A0: 20, A1: 0}, {A0: 100, A1: 40})
    assert [(x.partition, x.lost_from, x.lost_to) for x in losses] == [(0, 5, 20), (1, 40, 50)]
    assert "offsets [5, 20) of a-0" in losses[0].message()
    assert "failOnDataLoss=false" in losses[0].message()
    assert clamp_to_available({A0: 5, A1: 50}, {A0: 20, A1: 0}, {A0: 100, A1: 40}) == {
        A0: 20, A1: 0}


def test_available_now_cap() -> None:
    assert cap({A0: 10, A1: 50}, {A0: 20, A1: 30}) == {A0: 10, A1: 30}
