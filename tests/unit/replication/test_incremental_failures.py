"""A request's chunk that fails for a lasting reason refuses that request and nothing more;
the worker's own tasks and passing faults behave as before (pure: a recording target)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest

from pgshovel.errors import DatabaseError, DatabaseUnavailable
from pgshovel.replication.flights import Flight
from pgshovel.replication.incremental import IncrementalSnapshots, attempt_prefix, new_task
from pgshovel.source import Chunk, Column, KeyRange, StagedChunk, TableShape
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.state import SnapshotTask, WorkerState

ITEMS = TableShape("public", "items", (Column("id", "integer", "int4", True, 1),), ("id",))
RANGES = ((None, ("100",)), (("100",), None))


class RecordingTarget:
    def __init__(self) -> None:
        self.dropped: list[str] = []
        self.stored: list[WorkerState] = []

    def drop_staging(self, attempts: Any = None) -> None:
        self.dropped.extend(attempts or ())

    def store_state(self, state: WorkerState) -> None:
        self.stored.append(state)


def failing(error: BaseException) -> Future[StagedChunk]:
    future: Future[StagedChunk] = Future()
    future.set_exception(error)
    return future


def setup(origin: str) -> tuple[IncrementalSnapshots, RecordingTarget, WorkerState, list[Any]]:
    target = RecordingTarget()
    refusals: list[tuple[str, str]] = []
    snapshots = IncrementalSnapshots(
        "c",
        "s",
        "dbname=x",
        target,  # type: ignore[arg-type]
        parallel=2,
        on_failed=lambda name, reason: refusals.append((name, reason)),
    )
    task: SnapshotTask = new_task(ITEMS, "verify", origin=origin).plan(RANGES, 200)
    other = new_task(ITEMS, "verify", origin="request-2").plan(RANGES, 200)
    state = WorkerState(
        "streaming", "1:1:", StreamPosition.start((0,)), tables=(ITEMS,), tasks=(task, other)
    )
    for index in range(2):
        attempt = f"{attempt_prefix('c', 's')}{task.id}.{index}.abcdef"
        chunk = Chunk(attempt, "q", KeyRange(ITEMS, index, *RANGES[index]), cluster="c")
        error = DatabaseError(f"comparing a chunk failed: column 'v' does not exist ({index})")
        snapshots._flights[attempt] = Flight(chunk, task.id, index, failing(error))
    return snapshots, target, state, refusals


def test_a_lasting_failure_refuses_the_request_once_and_the_stream_goes_on() -> None:
    snapshots, target, state, refusals = setup("request-1")
    try:
        after = snapshots._finish_ready(state)
    finally:
        snapshots.close()
    assert [name for name, _ in refusals] == ["request-1"]
    assert "verify of public.items failed: comparing a chunk failed" in refusals[0][1]
    assert [task.origin for task in after.tasks] == ["request-2"]
    assert target.stored[-1] == after
    assert len(target.dropped) == 2, "both chunks' staging is dropped"
    assert not snapshots.busy


def test_the_workers_own_task_and_passing_faults_are_not_refusals() -> None:
    snapshots, _, state, refusals = setup("")
    try:
        with pytest.raises(DatabaseError):
            snapshots._finish_ready(state)
    finally:
        snapshots.close()
    assert refusals == []
    snapshots, _, state, refusals = setup("request-1")
    for flight in snapshots._flights.values():
        flight.future = failing(DatabaseUnavailable("the connection was lost"))
    try:
        assert snapshots._finish_ready(state) == state  # read again later
    finally:
        snapshots.close()
    assert refusals == []
