"""How numbers reach the operator: counts next to estimates, rates over the time they measure.

An estimate (the planner's row count) can be smaller than what was counted
(rows written since it was made): it is then shown as what it is, never as a
total the count passed. A rate is a count over the seconds it took, shown only
when those seconds are long enough to mean something.
"""

from __future__ import annotations

#: below this many seconds a rate says more about the clock than about the work
MIN_RATE_SECONDS = 0.05


def rows_of_estimate(rows: int, estimate: int) -> str:
    """``120/~400 rows``, or ``450 rows (~400 estimated)`` once the count passed the estimate."""
    if rows > estimate:
        return f"{rows} rows (~{estimate} estimated)"
    return f"{rows}/~{estimate} rows"


def rate(count: float, seconds: float, unit: str) -> str:
    """``1234 rows/s``; ``n/a rows/s`` when ``seconds`` is too short to measure."""
    if seconds < MIN_RATE_SECONDS:
        return f"n/a {unit}/s"
    return f"{count / seconds:.0f} {unit}/s"
