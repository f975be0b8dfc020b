"""A worker stand-in for the crash tests: recover, then commit micro-batches 1..N to 3 tables.

``python -m tests.unit.replication.tables._crash_child FORMAT ROOT LAST [CRASH]`` where
CRASH is ``intent:N`` (exit right after micro-batch N's intent is written),
``table:N:K`` (after its K-th table commit) or ``files:N`` (after its second
table's data files are written, before that table's commit). Micro-batch N's
net effects are a function of N alone (``effects_of``), as a micro-batch re-read
from its recorded offsets is the same micro-batch.
"""

from __future__ import annotations

import json
import os
import random
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from pgshovel.replication.tables._delta import DeltaTables
from pgshovel.replication.tables._effect import NetEffect
from pgshovel.replication.tables._iceberg import IcebergTables
from pgshovel.replication.tables._intents import (
    Intent,
    IntentLog,
    TableFormat,
    commit_micro_batch,
    recover,
)
from tests.unit.replication.tables._model import Model, apply, random_effect, shape

SHAPES = (shape("alpha"), shape("beta"), shape("gamma"))
KEYS = 25


def effects_of(counter: int, models: dict[str, Model]) -> dict[tuple[str, str], NetEffect]:
    """Micro-batch ``counter``'s net effects (two or three tables), given the tables' states."""
    rng = random.Random(counter)
    touched = rng.sample(SHAPES, rng.choice((2, 3)))
    return {
        table.identity: random_effect(table, models[table.name], rng, 8, KEYS, 1000 + counter)
        for table in sorted(touched, key=lambda table: table.identity)
    }


def expected(last: int) -> dict[str, Model]:
    """Each table's rows after micro-batches 1..last, and the last micro-batch touching it."""
    models: dict[str, Model] = {table.name: {} for table in SHAPES}
    for counter in range(1, last + 1):
        for (_, name), change in effects_of(counter, models).items():
            models[name] = apply(models[name], change)
    return models


def last_touch(last: int) -> dict[str, int]:
    models: dict[str, Model] = {table.name: {} for table in SHAPES}
    touches: dict[str, int] = {}
    for counter in range(1, last + 1):
        for (_, name), change in effects_of(counter, models).items():
            models[name] = apply(models[name], change)
            touches[name] = counter
    return touches


def open_tables(kind: str, root: Path) -> Any:
    if kind == "delta":
        return DeltaTables(root / "tables", "crash-test")
    return IcebergTables(root / "warehouse", "crash-test")


def intent_of(counter: int, tables: tuple[tuple[str, str], ...]) -> Intent:
    return Intent(
        counter,
        json.dumps({"offset": counter * 100}),
        json.dumps({"offset": counter * 100 + 100}),
        f"{counter}:{counter}:",
        tables,
        (counter,),
    )


def _crash_after_intent(log: IntentLog, counter: int) -> None:
    write = log.write

    def crashing(intent: Intent, attachment: Mapping[str, object] | None = None) -> None:
        write(intent, attachment)
        if intent.counter == counter:
            os._exit(9)

    log.write = crashing  # type: ignore[method-assign]


def _crash_after_tables(tables: TableFormat, counter: int, done: int) -> None:
    commit = tables.commit
    seen: list[int] = []

    def crashing(effect: Any, record: Any) -> Any:
        if record.counter == counter and len(seen) == done:
            os._exit(9)
        result = commit(effect, record)
        if record.counter == counter:
            seen.append(1)
        return result

    tables.commit = crashing  # type: ignore[method-assign]


def _crash_with_files_written(kind: str, tables: Any, counter: int) -> None:
    commit = tables.commit
    seen: list[int] = []

    def crashing(effect: NetEffect, record: Any) -> Any:
        if record.counter != counter or len(seen) < 1:
            seen.append(1)
            return commit(effect, record)
        if kind == "delta":
            # What a MERGE has done when it dies before its log entry: data files written.
            stray = Path(tables.path(effect.shape)) / f"part-00000-{uuid.uuid4()}-c000.parquet"
            pq.write_table(effect.upserts(), stray)
            os._exit(9)
        from pyiceberg.table import Transaction

        def die(self: Any) -> Any:  # pyiceberg wrote data files and manifests, not the catalog
            os._exit(9)

        Transaction.commit_transaction = die  # type: ignore[method-assign]
        return commit(effect, record)

    tables.commit = crashing


def main(kind: str, root: Path, last: int, crash: str | None) -> None:
    tables = open_tables(kind, root)
    log = IntentLog(root / "_pgshovel" / "intents")
    for table in SHAPES:
        tables.create(table)
    if crash is not None:
        what, *numbers = crash.split(":")
        if what == "intent":
            _crash_after_intent(log, int(numbers[0]))
        elif what == "table":
            _crash_after_tables(tables, int(numbers[0]), int(numbers[1]))
        else:
            _crash_with_files_written(kind, tables, int(numbers[0]))
    recovery = recover(tables, log, SHAPES)
    done = 0 if recovery.reapply is None else recovery.reapply.counter - 1
    if recovery.reapply is None and recovery.position is not None:
        done = json.loads(recovery.position)["offset"] // 100 - 1
    models = expected(done)
    for counter in range(done + 1, last + 1):
        effects = effects_of(counter, models)
        commit_micro_batch(tables, log, intent_of(counter, tuple(effects)), effects)
        for (_, name), change in effects.items():
            models[name] = apply(models[name], change)
    print(json.dumps({"resumed_after": done, "reapplied": recovery.behind}))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4] if sys.argv[4:] else None)
