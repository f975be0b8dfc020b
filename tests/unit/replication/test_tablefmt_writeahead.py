"""The Delta and Iceberg targets write a micro-batch ahead in its intent's file, durably, once.

A micro-batch's net effects and the worker state after it travel in the same
file as its intent (one temporary file, fsync, rename, fsync of the directory)
instead of a directory of their own written before it: the fixed cost of a
commit is two fsyncs fewer, and nothing is left to remove afterwards. A crash
before the table commits is completed from that file, and what an earlier
build wrote ahead (``pending/<counter>/``) is still completed on start.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from pgshovel.protocol import stream_pb2
from pgshovel.replication.tables._intents import IntentLog
from pgshovel.replication.targets._tablefmt_log import pending_from_document
from tests.unit.replication.test_table_targets import T, U, apply, make, mutation, rows, start

Op = stream_pb2.Mutation


def _crash_before_commits(target: Any) -> None:
    def crash(effect: Any, record: Any, *args: Any) -> Any:
        raise KeyboardInterrupt("killed after the intent, before any table commit")

    target.tables.commit = crash


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_micro_batch_costs_two_durable_files_and_leaves_none_to_remove(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = start(kind, tmp_path)
    tables = apply(target, 1, (T, U), mutation("t", Op.INSERT, new=1, a="a"))
    synced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(handle: int) -> None:
        synced.append(handle)
        real_fsync(handle)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    apply(target, 2, tables, mutation("t", Op.INSERT, new=2, a="b"))
    monkeypatch.undo()
    # The intent with the micro-batch written ahead (file, directory), then the state (file,
    # directory): a pending directory of its own cost two fsyncs more, and its removal.
    assert len(synced) == 4
    assert not (target.files.directory / "pending").exists()
    assert rows(target, T) == [(1, "a"), (2, "b")]
    target.close()


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_crash_before_the_table_commits_is_completed_from_the_intent(
    kind: str, tmp_path: Path
) -> None:
    target = start(kind, tmp_path)
    tables = apply(target, 1, (T, U), mutation("t", Op.INSERT, new=1, a="a"))
    _crash_before_commits(target)
    with pytest.raises(KeyboardInterrupt):
        apply(
            target,
            2,
            tables,
            mutation("t", Op.UPDATE, old=1, new=1, a="b"),
            mutation("u", Op.INSERT, new=9, a="u"),
        )
    target.close()
    log = IntentLog(target.files.intents)
    latest = log.latest()
    assert latest is not None and latest.counter == 3
    attached = log.attachment(3)
    assert attached is not None
    assert sorted(pending_from_document(3, attached).tables) == [T.identity, U.identity]
    reopened = make(kind, tmp_path)
    stored = reopened.open("c", "s")
    assert stored is not None and reopened.counter(T) == reopened.counter(U) == 3
    assert rows(reopened, T) == [(1, "b")]
    assert rows(reopened, U) == [(9, "u")]
    reopened.close()


def _move_to_earlier_layout(log: IntentLog, directory: Path, counter: int) -> None:
    """Rewrite intent ``counter`` as an earlier build left it: the intent alone, its
    micro-batch in ``pending/<counter>/`` (a Parquet file per table and pending.json)."""
    path = log.directory / f"{counter:020d}.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    attached = document.pop("attachment")
    path.write_text(json.dumps(document), encoding="utf-8")
    pending = pending_from_document(counter, attached)
    folder = directory / "pending" / f"{counter:020d}"
    folder.mkdir(parents=True)
    for index, table in enumerate(pending.tables.values()):
        pq.write_table(table.rows, folder / f"{index}.parquet")
    for entry in attached["tables"]:
        del entry["rows"]
    (folder / "pending.json").write_text(json.dumps(attached), encoding="utf-8")


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_micro_batch_written_ahead_by_an_earlier_build_is_completed(
    kind: str, tmp_path: Path
) -> None:
    target = start(kind, tmp_path)
    tables = apply(target, 1, (T, U), mutation("t", Op.INSERT, new=1, a="a"))
    _crash_before_commits(target)
    with pytest.raises(KeyboardInterrupt):
        apply(target, 2, tables, mutation("u", Op.INSERT, new=9, a="u"))
    target.close()
    _move_to_earlier_layout(IntentLog(target.files.intents), target.files.directory, 3)
    assert IntentLog(target.files.intents).attachment(3) is None
    reopened = make(kind, tmp_path)
    stored = reopened.open("c", "s")
    assert stored is not None and reopened.counter(U) == 3
    assert rows(reopened, U) == [(9, "u")]
    assert not (reopened.files.directory / "pending").exists()
    reopened.close()
