"""The apply benchmark's mixed workload plan: counts, mix, and rows that exist."""

from __future__ import annotations

import pytest

from bench._workload import mixed_plan, total_mutations


def test_plan_makes_exactly_the_requested_mutations() -> None:
    for mutations in (1, 999, 1000, 1750, 10_000, 12_345):
        assert total_mutations(mixed_plan(mutations, 1000)) == mutations


def test_plan_mixes_inserts_updates_and_deletes_four_two_one() -> None:
    plan = mixed_plan(70_000, 1000)
    counts = {"insert": 0, "update": 0, "delete": 0}
    for steps in plan:
        for step in steps:
            counts[step.operation] += step.count
    assert counts["insert"] == pytest.approx(40_000, rel=0.03)
    assert counts["update"] == pytest.approx(20_000, rel=0.03)
    assert counts["delete"] == pytest.approx(10_000, rel=0.03)


def test_updates_and_deletes_touch_only_rows_that_exist_and_are_not_deleted() -> None:
    alive: set[int] = set()
    for steps in mixed_plan(20_000, 100):
        for step in steps:
            ids = set(range(step.first, step.first + step.count))
            if step.operation == "insert":
                assert not ids & alive
                alive |= ids
            else:
                assert ids <= alive
                if step.operation == "delete":
                    alive -= ids


def test_plan_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="mutations"):
        mixed_plan(0)
