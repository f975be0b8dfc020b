"""The worker's side of requests, pure parts: what a finished task of a request leads to."""

from __future__ import annotations

from pgshovel.replication.incremental import new_task
from pgshovel.replication.requests import follow_ups
from pgshovel.source import Column, TableShape
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.state import SnapshotTask, WorkerState, from_document, to_document

TABLE = TableShape("public", "t", (Column("id", "integer", "int4", True, 1),), ("id",))
RANGES = ((None, ("100",)), (("100",), ("200",)), (("200",), None))


def verify(repair: bool, differences: tuple[tuple[int, int, int, int], ...]) -> SnapshotTask:
    task = new_task(TABLE, "verify", origin="request-1", repair=repair).plan(RANGES, 300)
    for index in range(len(RANGES)):
        task = task.record(index, 100, tuple(d for d in differences if d[0] == index))
    return task


def test_a_verify_with_repair_leads_to_the_repair_of_just_the_differing_ranges() -> None:
    (repair,) = follow_ups(verify(True, ((0, 99, 100, 1), (2, 100, 98, 2))), TABLE)
    assert repair.purpose == "repair"
    assert repair.ranges == (RANGES[0], RANGES[2])
    assert repair.origin == "request-1"
    assert not repair.done


def test_the_verify_after_a_repair_only_reports() -> None:
    (repair,) = follow_ups(verify(True, ((1, 100, 0, 5),)), TABLE)
    done = repair.record(0, 100)
    (check,) = follow_ups(done, TABLE)
    assert (check.purpose, check.ranges, check.repair) == ("verify", (RANGES[1],), False)
    # still different after the repair: reported, never repaired again
    still = check.record(0, 100, ((0, 100, 99, 1),))
    assert follow_ups(still, TABLE) == []


def test_every_table_of_a_request_is_repaired_whatever_the_order_they_finish_in() -> None:
    # The flag lives in each task: finishing one table's verify changes nothing for the next.
    tasks = [verify(True, ((0, 1, 0, 1),)) for _ in range(6)]
    assert all(len(follow_ups(task, TABLE)) == 1 for task in tasks)


def test_nothing_follows_a_verify_without_repair_a_clean_verify_or_a_vanished_table() -> None:
    assert follow_ups(verify(False, ((0, 1, 0, 1),)), TABLE) == []
    assert follow_ups(verify(True, ()), TABLE) == []
    assert follow_ups(verify(True, ((0, 1, 0, 1),)), None) == []


def test_the_repair_flag_survives_the_stored_state() -> None:
    task = verify(True, ())
    state = WorkerState("streaming", "1:1:", StreamPosition.start((0,)), tasks=(task,))
    assert from_document(to_document(state)).tasks == (task,)
    older = to_document(state)
    del older["tasks"][0]["repair"]  # a state stored before the flag existed
    assert from_document(older).tasks[0].repair is False
