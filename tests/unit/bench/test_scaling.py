"""The scaling group's figures: two Spark cores against one, partitions reported as missing."""

from __future__ import annotations

from bench import scaling
from bench._modes import settings


def test_scaling_figures_compare_two_cores_with_one_and_say_why_partitions_are_missing() -> None:
    runs = scaling.ScalingRuns(
        mutations=10,
        rates={"local[1]": [100.0], "local[2]": [150.0]},
        cpu_us={"local[1]": [40.0], "local[2]": [44.0]},
    )
    made = {figure.key: figure for figure in scaling.figures(runs, settings("quick"))}
    assert made["scaling.cores"].ratio == 1.5
    assert made["scaling.cores_cpu"].ratio == 1.1
    assert made["scaling.partitions"].note.startswith("not measured: ")
