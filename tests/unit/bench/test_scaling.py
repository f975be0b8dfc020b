"""The scaling group's figures: two Spark cores (local, standalone) against one, four partitions
against one."""

from __future__ import annotations

from bench import scaling
from bench._modes import settings


def test_scaling_figures_compare_two_cores_with_one_and_four_partitions_with_one() -> None:
    runs = scaling.ScalingRuns(
        mutations=10,
        rates={"local[1]": [100.0], "local[2]": [150.0]},
        cpu_us={"local[1]": [40.0], "local[2]": [44.0]},
        partition_rates={1: [150.0], 4: [90.0]},
        partition_cpu_us={1: [44.0], 4: [88.0]},
        standalone_rates={1: [80.0], 2: [140.0]},
    )
    made = {figure.key: figure for figure in scaling.figures(runs, settings("quick"))}
    assert made["scaling.cores"].ratio == 1.5
    assert made["scaling.cores_cpu"].ratio == 1.1
    assert made["scaling.partitions"].ratio == 0.6
    assert made["scaling.partitions_cpu"].ratio == 2.0
    assert made["scaling.standalone"].ratio == 1.75
    assert not made["scaling.partitions"].note


def test_quick_mode_says_why_nothing_is_measured() -> None:
    runs = scaling.measure(None, settings("quick"), None)  # type: ignore[arg-type]
    made = scaling.figures(runs, settings("quick"))
    assert {figure.key for figure in made} == {
        "scaling.cores",
        "scaling.cores_cpu",
        "scaling.standalone",
        "scaling.partitions",
        "scaling.partitions_cpu",
    }
    assert all(figure.note == scaling.FULL_ONLY_NOTE for figure in made)
