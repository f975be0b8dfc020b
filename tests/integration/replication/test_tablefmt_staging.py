"""Staged apply into Delta and Iceberg: Spark tasks stage files, the driver commits once.

Random micro-batches of a keyed table's row changes (inserts, updates that keep
or move keys across partitions, deletes, TRUNCATE, provenance) are encoded as
the relay's ROWS messages, routed to partitions, cut into tasks, and staged by
tasks of a real local SparkSession through the target's own ``stage_sink``;
the driver commits them with ``commit_stages``. A second copy applies the same
changes through the driver path (planner, ``apply``); after every micro-batch
both tables are equal column for column, change columns included. A killed
attempt's files (never handed back to the driver) are never read, each
micro-batch's directory is gone after its commit, and a crash's leftover
directory is removed when the target opens.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from pgshovel.protocol import stream_pb2
from pgshovel.replication.mutations import key_text
from pgshovel.replication.staging.reduce import reduce_messages
from pgshovel.replication.staging.tablefmt import MICRO_BATCH_PREFIX, TableStageSink
from pgshovel.replication.targets._tablefmt import TableFormatTarget
from pgshovel.replication.targets.delta import DeltaTarget
from pgshovel.replication.targets.iceberg import IcebergTarget
from pgshovel.source import cast_is_exact
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.plan import plan_micro_batch
from pgshovel.stream.rows import to_mutations
from pgshovel.stream.state import WorkerState
from tests._positions import after
from tests._staged_rows import KEYED, Changes, Messages, cut

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SHAPES = {KEYED.identity: KEYED}


def _make(kind: str, root: Path) -> TableFormatTarget:
    return DeltaTarget(str(root)) if kind == "delta" else IcebergTarget(str(root))


def _start(kind: str, root: Path) -> TableFormatTarget:
    target = _make(kind, root)
    assert target.open("c", "s") is None
    snapshot = WorkerState("snapshot", "100:100:", after(0), (KEYED,))
    target.begin_snapshot(snapshot)
    target.finish_snapshot(snapshot.replace(phase="streaming"))
    return target


def _state(number: int) -> WorkerState:
    return WorkerState("streaming", "100:100:", after(number), (KEYED,), horizon="120:121:")


def _table(target: TableFormatTarget) -> list[tuple[Any, ...]]:
    rows = target.tables.read(KEYED)
    names = sorted(rows.column_names)
    return sorted(
        (tuple(str(row[name]) for name in names) for row in rows.to_pylist()),
    )


def _stage_task(item: tuple[int, list[tuple[int, bytes]], dict[int, int], TableStageSink]) -> Any:
    """What ``run_stage_task`` does after reading: reduce with details, stage per attempt."""
    from pyspark import TaskContext

    number, messages, batch_ids, sink = item
    decoded = [(ordinal, stream_pb2.MutationBatch.FromString(raw)) for ordinal, raw in messages]
    staged = reduce_messages(decoded, SHAPES, details=sink.details)
    for table in staged.values():
        table.batch_ids = batch_ids
    context = TaskContext.get()
    return sink.stage(number, context.attemptNumber() if context else 0, staged)


def _driver_batches(whole: Messages, batch_ids: list[int], first: int) -> list[CommittedBatch]:
    by_ordinal: dict[int, list[stream_pb2.Mutation]] = {}
    for ordinal, message in whole:
        by_ordinal.setdefault(ordinal, []).extend(to_mutations(message))
    return [
        CommittedBatch(
            node=b"n" * 16,
            batch_id=batch_id,
            begin=stream_pb2.Begin(),
            mutations=tuple(by_ordinal.get(ordinal, [])),
            position=after(first + ordinal),
        )
        for ordinal, batch_id in enumerate(batch_ids)
    ]


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_staged_micro_batches_equal_the_driver_path(spark: Any, kind: str, tmp_path: Path) -> None:
    rng = random.Random(kind)
    staged_target = _start(kind, tmp_path / "staged")
    driver_target = _start(kind, tmp_path / "driver")
    changes = Changes(rng)
    number = 0
    staging = staged_target.files.staging / "_staging"
    for micro_batch in range(6):
        batches = rng.randint(1, 4)
        parts, whole = changes.micro_batch(batches, rng.choice([1, 2, 4]))
        batch_ids = list(range(10 * micro_batch + 1, 10 * micro_batch + 1 + batches))
        ordinals = dict(enumerate(batch_ids))
        driver = _driver_batches(whole, batch_ids, number + 1)
        number += batches
        plan = plan_micro_batch(
            driver, (KEYED,), (), can_alter_type=cast_is_exact, key_text=key_text
        )
        driver_target.apply(plan, _state(number))

        sink, name = staged_target.stage_sink(f"m{micro_batch}")
        tasks = [
            (task, [(o, m.SerializeToString()) for o, m in messages], ordinals, sink)
            for task, messages in enumerate(cut(rng, parts))
        ]
        # A killed attempt of task 0: its files lie in the micro-batch's directory, but the
        # driver never got them back, so they are never read.
        killed = reduce_messages(
            [(0, message) for _o, message in whole[:1]] if whole else [], SHAPES, details=True
        )
        for table in killed.values():
            table.batch_ids = ordinals
            table.rows = {key: (place, True, "") for key, (place, _d, _l) in table.rows.items()}
        sink.stage(0, 9, killed)
        results = spark.sparkContext.parallelize(tasks, max(len(tasks), 1)).map(_stage_task)
        stages = [stage for staged in results.collect() for stage in staged]
        assert all("a0_" in Path(stage.path).name for stage in stages)
        staged_target.commit_stages(name, stages, _state(number))
        assert not (staging / f"{MICRO_BATCH_PREFIX}m{micro_batch}").exists()
        assert _table(staged_target) == _table(driver_target), f"micro-batch {micro_batch}"
    assert changes.truncates > 0
    copy = {row["id"]: row["note"] for row in staged_target.tables.read(KEYED).to_pylist()}
    assert copy == {key: note for key, (note, _txid) in changes.model.items()}

    # A crash between staging and commit leaves a directory: removed when the target opens.
    leftover = staging / f"{MICRO_BATCH_PREFIX}dead"
    leftover.mkdir(parents=True)
    (leftover / "0a0_0.parquet").write_bytes(b"not parquet")
    staged_target.close()
    reopened = _make(kind, tmp_path / "staged")
    assert reopened.open("c", "s") == _state(number)
    assert not leftover.exists()
    assert _table(reopened) == _table(driver_target)
    reopened.close()
    driver_target.close()
