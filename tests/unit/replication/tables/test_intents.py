"""The intent log and the recovery plan across several tables (pure, plus files in a tmp dir)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgshovel.errors import ProgrammingError, RecoveryNeeded
from pgshovel.replication.tables._intents import Intent, IntentLog, Recovery, plan_recovery

A, B, C = ("public", "a"), ("public", "b"), ("sales", "c")


def intent(counter: int, tables: tuple[tuple[str, str], ...] = (A, B)) -> Intent:
    return Intent(
        counter,
        json.dumps({"offset": counter * 10}),
        json.dumps({"offset": counter * 10 + 10}),
        f"{counter}:{counter + 1}:",
        tables,
        (counter,),
    )


def test_nothing_recorded_starts_from_nothing() -> None:
    assert plan_recovery(None, {A: None, B: None}) == Recovery(None)


def test_every_table_of_the_last_intent_holds_it_so_the_stream_resumes_after_it() -> None:
    last = intent(5)
    # C was not touched by micro-batch 5: an older counter is fine.
    assert plan_recovery(last, {A: 5, B: 5, C: 2}) == Recovery(last.end)


@pytest.mark.parametrize(
    ("counters", "behind"),
    [
        ({A: 4, B: 4}, (A, B)),  # stopped after the intent, before any table
        ({A: 5, B: 4}, (B,)),  # stopped between the two tables' commits
        ({A: None, B: None}, (A, B)),  # the intent of the very first micro-batch
    ],
)
def test_the_tables_behind_the_last_intent_get_it_again(
    counters: dict[tuple[str, str], int | None], behind: tuple[tuple[str, str], ...]
) -> None:
    last = intent(5)
    assert plan_recovery(last, counters) == Recovery(last.end, last, behind)


def test_a_table_ahead_of_the_intent_log_names_the_tables_and_remedies() -> None:
    with pytest.raises(RecoveryNeeded, match=r"tables \[\('public', 'b'\)\] hold micro-batches"):
        plan_recovery(intent(5), {A: 5, B: 6})
    with pytest.raises(RecoveryNeeded, match="pgshovel-admin set resnapshot SET TABLE"):
        plan_recovery(None, {A: 1})


def test_the_log_writes_durably_reads_back_and_keeps_the_latest(tmp_path: Path) -> None:
    log = IntentLog(tmp_path / "intents")
    assert log.latest() is None and log.counters() == []
    for counter in (1, 2, 3):
        log.write(intent(counter))
    assert log.latest() == intent(3) and log.read(2) == intent(2)
    log.prune()
    assert log.counters() == [3]
    assert not list((tmp_path / "intents").glob(".*"))  # no temporary file left
    log.write(intent(3))  # the same intent again (a re-applied micro-batch): nothing changes
    assert log.counters() == [3]


def test_the_log_refuses_a_different_micro_batch_under_a_recorded_counter(tmp_path: Path) -> None:
    log = IntentLog(tmp_path)
    log.write(intent(1))
    with pytest.raises(ProgrammingError, match="re-applied exactly as it was recorded"):
        log.write(intent(1, (A,)))
    with pytest.raises(ProgrammingError, match="does not follow the last recorded one"):
        log.write(intent(3))
