"""Snapshot progress: rows done per table, summed from Spark tasks, logged with rows/s.

Tasks add ``{table: rows}`` to a Spark accumulator when a range is done; a
driver thread logs the totals every few seconds while the load runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from pyspark.accumulators import AccumulatorParam

from pgshovel._numbers import rate, rows_of_estimate

logger = logging.getLogger(__name__)

Counts = dict[str, int]


class CountsParam(AccumulatorParam[Counts]):
    """Adds row counts per table."""

    def zero(self, value: Counts) -> Counts:
        return {}

    def addInPlace(self, value1: Counts, value2: Counts) -> Counts:
        for table, rows in value2.items():
            value1[table] = value1.get(table, 0) + rows
        return value1


def format_progress(counts: Mapping[str, int], totals: Mapping[str, int], elapsed: float) -> str:
    """``table: done/~estimated rows (rate rows/s)`` for every table, pure; a count past the
    planner's estimate (rows written since) shows as ``done rows (~estimated estimated)``."""
    parts = []
    for table, estimated in totals.items():
        done = counts.get(table, 0)
        parts.append(
            f"{table}: {rows_of_estimate(done, estimated)} ({rate(done, elapsed, 'rows')})"
        )
    return "; ".join(parts)


class ProgressLogger:
    """Logs ``read()`` every ``interval`` seconds until stopped."""

    def __init__(
        self, read: Callable[[], Mapping[str, int]], totals: Mapping[str, int], interval: float
    ) -> None:
        self._read = read
        self._totals = totals
        self._interval = interval
        self._stop = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="snapshot progress", daemon=True)

    def __enter__(self) -> ProgressLogger:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self._interval + 1)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            elapsed = time.monotonic() - self._started
            logger.info(
                "snapshot progress: %s", format_progress(self._read(), self._totals, elapsed)
            )
