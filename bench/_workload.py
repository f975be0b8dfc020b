"""Pure plans of the benchmark workloads: which rows each transaction touches.

The apply benchmark needs a realistic mix of inserts, updates and deletes on
rows that exist; :func:`mixed_plan` lays it out as transactions of id ranges
so the source and the expected mutation count are known before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Operation = Literal["insert", "update", "delete"]


@dataclass(frozen=True)
class Step:
    """One statement: ``operation`` on ids ``first`` .. ``first + count - 1``."""

    operation: Operation
    first: int
    count: int


def mixed_plan(mutations: int, chunk: int = 1000) -> list[list[Step]]:
    """Transactions totalling ``mutations`` row changes: 4 inserts : 2 updates : 1 delete.

    Each transaction inserts ``chunk`` new rows, updates the first half of the
    rows the previous transaction inserted and deletes the last quarter of them,
    so every update and delete hits a row that exists and the net state is known.
    """
    if mutations < 1 or chunk < 4:
        raise ValueError(f"need mutations >= 1 and chunk >= 4, got {mutations!r}, {chunk!r}")
    plan: list[list[Step]] = []
    done = 0
    next_id = 1
    previous: int | None = None
    while done < mutations:
        steps = [Step("insert", next_id, min(chunk, mutations - done))]
        done += steps[0].count
        if previous is not None and done < mutations:
            updates = min(chunk // 2, mutations - done)
            steps.append(Step("update", previous, updates))
            done += updates
        if previous is not None and done < mutations:
            deletes = min(chunk // 4, mutations - done)
            steps.append(Step("delete", previous + chunk - chunk // 4, deletes))
            done += deletes
        previous = next_id
        next_id += chunk
        plan.append(steps)
    return plan


def total_mutations(plan: list[list[Step]]) -> int:
    return sum(step.count for steps in plan for step in steps)
