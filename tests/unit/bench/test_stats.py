"""The benchmarks' arithmetic: run schedules, medians, ratios, percentiles, per-million scaling."""

from __future__ import annotations

import pytest

from bench._stats import median, per_million, percentile, ratio, schedule


def test_schedule_alternates_and_flips_the_order_every_other_round() -> None:
    assert schedule(3, ["a", "b"]) == [(0, "a"), (0, "b"), (1, "b"), (1, "a"), (2, "a"), (2, "b")]


def test_schedule_runs_every_variant_once_per_round() -> None:
    order = schedule(4, ["none", "pgshovel", "jsontriga"])
    assert len(order) == 12
    for number in range(4):
        assert sorted(v for r, v in order if r == number) == ["jsontriga", "none", "pgshovel"]


@pytest.mark.parametrize(("rounds", "variants"), [(0, ["a"]), (3, [])])
def test_schedule_refuses_empty_plans(rounds: int, variants: list[str]) -> None:
    with pytest.raises(ValueError, match=r"rounds|variant"):
        schedule(rounds, variants)


def test_median_of_odd_and_even_counts_and_nothing() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
    assert median([]) is None


def test_ratio_is_none_without_a_usable_baseline() -> None:
    assert ratio(50.0, 200.0) == 0.25
    assert ratio(None, 2.0) is None
    assert ratio(1.0, None) is None
    assert ratio(1.0, 0.0) is None


def test_percentile_uses_the_nearest_rank() -> None:
    values = [float(v) for v in range(100, 0, -1)]  # 100 .. 1, unsorted on purpose
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.99) == 99.0
    assert percentile(values, 1.0) == 100.0
    assert percentile([7.0], 0.99) == 7.0
    assert percentile([], 0.5) is None
    with pytest.raises(ValueError, match="fraction"):
        percentile(values, 99)


def test_per_million_scales_and_refuses_no_events() -> None:
    assert per_million(2.0, 200_000) == pytest.approx(10.0)
    assert per_million(2.0, 0) is None
