"""The benchmark report: goals, the Markdown table and the JSON document."""

from __future__ import annotations

import json

from bench._report import Figure, Goal, document, format_number, render_table


def throughput(values: list[float], baseline: list[float]) -> Figure:
    return Figure(
        key="relay.throughput",
        title="relay throughput (events/s)",
        unit="/s",
        values=values,
        baseline=baseline,
        baseline_title="raw producer",
        goals=(Goal("value", ">=", 50_000), Goal("ratio", ">=", 0.5)),
    )


def test_a_figure_uses_the_medians_and_meets_every_goal() -> None:
    figure = throughput([60_000, 70_000, 65_000], [100_000, 120_000, 110_000])
    assert figure.value == 65_000
    assert figure.baseline_value == 110_000
    assert figure.ratio is not None and round(figure.ratio, 3) == 0.591
    assert figure.met is True


def test_a_figure_misses_when_one_goal_misses() -> None:
    assert throughput([60_000] * 3, [200_000] * 3).met is False


def test_upper_bound_goal() -> None:
    latency = Figure(
        "latency.p99", "p99", "ms", values=[120, 160, 140], goals=(Goal("value", "<=", 150),)
    )
    assert latency.met is True
    latency.values = [151, 160, 170]
    assert latency.met is False


def test_met_is_unknown_without_goals_or_without_a_baseline() -> None:
    assert Figure("x", "x", "s", values=[1.0]).met is None
    assert Figure("x", "x", "s", values=[1.0], goals=(Goal("ratio", ">=", 0.5),)).met is None


def test_table_has_one_row_per_figure_with_value_baseline_ratio_goal_and_verdict() -> None:
    table = render_table(
        [
            throughput([21_000, 22_000, 20_000], [200_000, 210_000, 190_000]),
            Figure("apply", "apply (rows/s)", "/s", note="not measured: worker | broken"),
        ]
    )
    lines = table.splitlines()
    assert lines[0] == "| figure | value | baseline | ratio | goal | met |"
    assert lines[1] == "|---|---|---|---|---|---|"
    assert lines[2] == (
        "| relay throughput (events/s) | 21,000 /s | 200,000 /s (raw producer) | 0.105 "
        "| ≥ 50,000 /s, ≥ 0.5x | **no** |"
    )
    # A pipe inside a cell must not split the row.
    assert lines[3] == "| apply (rows/s) | not measured: worker \\| broken | - | - | - | - |"


def test_numbers_are_readable() -> None:
    assert format_number(1234567.8) == "1,234,568"
    assert format_number(123.4) == "123"
    assert format_number(12.34) == "12.3"
    assert format_number(0.8512) == "0.851"
    assert format_number(0) == "0"
    assert format_number(None) == "-"


def test_document_keeps_every_raw_run_and_is_json() -> None:
    figure = throughput([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    result = document([figure], "quick", {"nproc": 2}, "2026-01-01T00:00:00+00:00", 12.345)
    text = json.dumps(result)
    loaded = json.loads(text)
    assert loaded["mode"] == "quick"
    assert loaded["machine"] == {"nproc": 2}
    assert loaded["seconds"] == 12.3
    saved = loaded["figures"][0]
    assert saved["runs"] == [1.0, 2.0, 3.0]
    assert saved["baseline_runs"] == [4.0, 5.0, 6.0]
    assert saved["median"] == 2.0 and saved["baseline_median"] == 5.0
    assert saved["ratio"] == 0.4
    assert saved["goals"] == ["≥ 50,000 /s", "≥ 0.5x"]
    assert saved["met"] is False
    assert loaded["table"].startswith("| figure |")


def floor_gap(values: list[float], floor: list[float], none: list[float]) -> Figure:
    return Figure(
        "capture.tpcb.pgshovel_floor",
        "pgshovel vs the floor (TPS)",
        "tps",
        values=values,
        baseline=floor,
        baseline_title="capture floor",
        goals=(Goal("gap", ">=", -0.05),),
        reference=none,
        reference_title="no capture",
    )


def test_gap_is_the_difference_of_both_ratios_to_the_reference() -> None:
    # pgshovel at 0.80 of no capture, the floor at 0.83: within 0.05 of the floor.
    figure = floor_gap([800, 790, 810], [830, 820, 840], [1000, 990, 1010])
    assert figure.gap is not None and round(figure.gap, 3) == -0.03
    assert figure.met is True
    assert floor_gap([700] * 3, [830] * 3, [1000] * 3).met is False
    assert floor_gap([700] * 3, [830] * 3, []).met is None
    assert throughput([1.0], [2.0]).gap is None


def test_a_gap_shows_next_to_the_ratio_and_in_the_document() -> None:
    figure = floor_gap([800] * 3, [830] * 3, [1000] * 3)
    row = render_table([figure]).splitlines()[2]
    assert row == (
        "| pgshovel vs the floor (TPS) | 800 tps | 830 tps (capture floor) "
        "| 0.964 (gap -0.030 vs no capture) | gap ≥ -0.05 | yes |"
    )
    saved = document([figure], "quick", {}, "", 0.0)["figures"][0]
    assert saved["reference_runs"] == [1000] * 3
    assert round(saved["gap"], 3) == -0.03
    assert saved["goals"] == ["gap ≥ -0.05"]
