"""Pure arithmetic of the benchmarks: run schedules, medians, ratios and percentiles.

Shared machines drift, so every figure is measured as alternating runs of its
variants (A, B, A, B ...), with the order flipped every other round (ABBA) so a
slow trend hits both variants alike; the figure is the median of each
variant's runs and the ratio of those medians.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def schedule(rounds: int, variants: Sequence[str]) -> list[tuple[int, str]]:
    """(round, variant) in run order: every variant once a round, order flipped each other round."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds!r}")
    if not variants:
        raise ValueError("a schedule needs at least one variant")
    order: list[tuple[int, str]] = []
    for number in range(rounds):
        names = list(variants) if number % 2 == 0 else list(reversed(variants))
        order.extend((number, name) for name in names)
    return order


def median(values: Sequence[float]) -> float | None:
    """The median, or None when there is no value (the figure was not measured)."""
    return statistics.median(values) if values else None


def ratio(value: float | None, baseline: float | None) -> float | None:
    """value ÷ baseline, or None when either is missing or the baseline is zero."""
    if value is None or baseline is None or baseline == 0:
        return None
    return value / baseline


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile (``fraction`` in [0, 1]) of ``values``; None when empty."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be within [0, 1], got {fraction!r}")
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def per_million(amount: float, events: int) -> float | None:
    """``amount`` scaled to one million events (None when no event was processed)."""
    if events <= 0:
        return None
    return amount * 1_000_000 / events
