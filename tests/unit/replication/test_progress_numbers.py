"""Numbers the worker logs are true: rates over the time they took, counts next to estimates."""

from __future__ import annotations

import logging
import re
import time
from concurrent.futures import Future
from typing import Any

import pytest

from pgshovel._numbers import rate, rows_of_estimate
from pgshovel.replication.incremental import IncrementalSnapshots, new_task
from pgshovel.replication.progress import format_progress
from pgshovel.source import Column, TableShape
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.state import WorkerState

ITEMS = TableShape("public", "items", (Column("id", "integer", "int4", True),), ("id",))


def test_a_count_past_its_estimate_says_so() -> None:
    assert rows_of_estimate(120, 400) == "120/~400 rows"
    assert rows_of_estimate(3698, 2052) == "3698 rows (~2052 estimated)"
    assert format_progress({"public.a": 3698}, {"public.a": 2052}, 2.0) == (
        "public.a: 3698 rows (~2052 estimated) (1849 rows/s)"
    )


def test_no_rate_from_a_span_too_short_to_measure() -> None:
    assert rate(600, 2.0, "rows") == "300 rows/s"
    assert rate(1000, 0.000002, "rows") == "n/a rows/s"


class _Target:
    def chunk_sink(self) -> object:
        return object()


def test_a_repair_rate_counts_from_its_first_range(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repair task arrives planned (its ranges are the differing ones): its clock started
    only when its first range was logged, so a range of 1000 rows logged "439657058 rows/s"."""
    snapshots = IncrementalSnapshots("c", "s", "dbname=x", _Target(), parallel=1)  # type: ignore[arg-type]
    try:
        monkeypatch.setattr(snapshots._pool, "submit", lambda *args: Future[Any]())
        repair = new_task(ITEMS, "repair", origin="request-1").plan(((None, None),), 1000)
        state = WorkerState(
            "streaming", "1:1:", StreamPosition.start((0,)), tables=(ITEMS,), tasks=(repair,)
        )
        snapshots._launch(state)  # the range starts
        time.sleep(0.3)  # reading it takes a while
        with caplog.at_level(logging.INFO, logger="pgshovel.replication.incremental"):
            snapshots._log(repair.record(0, 1000, ()), 1000)
        per_second = re.search(r"\((\d+) rows/s", caplog.text)
        assert per_second is not None, caplog.text
        assert int(per_second.group(1)) <= 1000 / 0.3, caplog.text
    finally:
        snapshots.close()
