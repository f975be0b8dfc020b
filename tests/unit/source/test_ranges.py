"""Key range boundaries: every key in exactly one range, composite keys as row values."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pgshovel.source import Column, TableShape, make_ranges, pick_boundaries

TABLE = TableShape(
    schema="public",
    name="t",
    columns=(Column("a", "integer", "int4"), Column("b", "text", "text")),
    key=("a", "b"),
)


def test_boundaries_are_evenly_spread_and_distinct() -> None:
    sample = [(str(i),) for i in range(100)]
    assert pick_boundaries(sample, 4) == [("25",), ("50",), ("75",)]
    assert pick_boundaries([("1",)] * 50 + [("2",)] * 50, 8) == [("2",)]
    assert pick_boundaries([], 8) == []
    assert pick_boundaries(sample, 1) == []


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 3)), max_size=60), st.integers(1, 9))
def test_ranges_cover_every_key_exactly_once(keys: list[tuple[int, int]], parts: int) -> None:
    # Integer pairs stand in for key texts: the logic only compares and copies them.
    sample: Any = sorted(keys)
    boundaries = pick_boundaries(sample, parts)
    assert boundaries == sorted(set(boundaries))
    ranges = make_ranges(TABLE, boundaries)
    assert len(ranges) == len(boundaries) + 1
    for key in [(a, b) for a in range(-1, 22) for b in range(-1, 5)]:
        bounds: list[tuple[Any, Any]] = [(r.lower, r.upper) for r in ranges]
        holding = [
            (lower, upper)
            for lower, upper in bounds
            if (lower is None or key >= lower) and (upper is None or key < upper)
        ]
        assert len(holding) == 1
