"""Staging micro-batches of ``tests._staged_rows`` into a Delta or Iceberg copy with Spark tasks.

``stage_micro_batch`` runs one micro-batch's tasks on a SparkSession (what
``run_stage_task`` does after reading Kafka: reduce with details, stage under
the attempt's own names) and commits the stages handed back through the
target's ``commit_stages``. Run as a module (``python -m
tests.integration.replication._tablefmt_stage ROOT SEED``), it stages the
seed's micro-batches into a Delta and an Iceberg copy on a local session that retries a failed task
(``local[2,2]``), every micro-batch's task 0 failing on its first attempt
after it staged its files: what a task killed after writing looks like.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa

from pgshovel.protocol import stream_pb2
from pgshovel.replication.mutations import key_text
from pgshovel.replication.staging.reduce import reduce_messages
from pgshovel.replication.staging.tablefmt import FileStage, TableStageSink
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

SHAPES = {KEYED.identity: KEYED}
MICRO_BATCHES = 5
#: how many of a seed's micro-batches the retrying session stages (each retry costs seconds)
RETRIED = 2

Task = tuple[int, list[tuple[int, bytes]], dict[int, int], TableStageSink, bool]


def make(kind: str, root: Path) -> TableFormatTarget:
    """The copy keeps an SCD2 history too (its deleted keys' transactions matter)."""
    if kind == "delta":
        return DeltaTarget(str(root), history=True)
    return IcebergTarget(str(root), history=True)


def start(kind: str, root: Path) -> TableFormatTarget:
    target = make(kind, root)
    assert target.open("c", "s") is None
    snapshot = WorkerState("snapshot", "100:100:", after(0), (KEYED,))
    target.begin_snapshot(snapshot)
    target.finish_snapshot(snapshot.replace(phase="streaming"))
    return target


def state(number: int) -> WorkerState:
    return WorkerState("streaming", "100:100:", after(number), (KEYED,), horizon="120:121:")


def plan(seed: int) -> list[tuple[list[Messages], Messages, list[int], list[Messages]]]:
    """The seed's micro-batches: (partitions' messages, one partition's, batch ids, tasks)."""
    rng = random.Random(seed)
    changes = Changes(rng)
    out = []
    for micro_batch in range(MICRO_BATCHES):
        batches = rng.randint(1, 4)
        parts, whole = changes.micro_batch(batches, rng.choice([1, 2, 4]))
        batch_ids = list(range(10 * micro_batch + 1, 10 * micro_batch + 1 + batches))
        out.append((parts, whole, batch_ids, cut(rng, parts)))
    return out


def stage_task(item: Task) -> list[FileStage]:
    from pyspark import TaskContext

    number, messages, batch_ids, sink, fail_first = item
    decoded = [(ordinal, stream_pb2.MutationBatch.FromString(raw)) for ordinal, raw in messages]
    staged = reduce_messages(decoded, SHAPES, details=sink.details)
    for table in staged.values():
        table.batch_ids = batch_ids
    context = TaskContext.get()
    attempt = context.attemptNumber() if context else 0
    stages = sink.stage(number, attempt, staged)
    if fail_first and attempt == 0:
        raise RuntimeError(f"task {number} killed after staging its files")
    return stages


def stage_micro_batch(
    spark: Any,
    target: TableFormatTarget,
    name: str,
    tasks: list[Messages],
    batch_ids: list[int],
    number: int,
    fail_first: bool = False,
) -> list[FileStage]:
    """Stage ``tasks`` on ``spark`` and commit them with the state after batch ``number``."""
    sink, micro_batch = target.stage_sink(name)
    items: list[Task] = [
        (
            task,
            [(ordinal, message.SerializeToString()) for ordinal, message in messages],
            dict(enumerate(batch_ids)),
            sink,
            fail_first and task == 0,
        )
        for task, messages in enumerate(tasks)
    ]
    job = spark.sparkContext.parallelize(items, max(len(items), 1)).map(stage_task)
    stages = [stage for staged in job.collect() for stage in staged]
    target.commit_stages(micro_batch, stages, state(number))
    return stages


def apply_driver(
    target: TableFormatTarget, whole: Messages, batch_ids: list[int], number: int
) -> None:
    """The same micro-batch through the driver path (planner, ``apply``); ``number``: the
    last batch's."""
    by_ordinal: dict[int, list[stream_pb2.Mutation]] = {}
    for ordinal, message in whole:
        by_ordinal.setdefault(ordinal, []).extend(to_mutations(message))
    first = number - len(batch_ids) + 1
    batches = [
        CommittedBatch(
            node=b"n" * 16,
            batch_id=batch_id,
            begin=stream_pb2.Begin(),
            mutations=tuple(by_ordinal.get(ordinal, [])),
            position=after(first + ordinal),
        )
        for ordinal, batch_id in enumerate(batch_ids)
    ]
    result = plan_micro_batch(
        batches, (KEYED,), (), can_alter_type=cast_is_exact, key_text=key_text
    )
    target.apply(result, state(number))


def table(target: TableFormatTarget) -> list[tuple[str, ...]]:
    """Every column of the copy (change columns too) as text, sorted; the history's
    rows follow where the copy keeps one."""
    rows = target.tables.read(KEYED)
    histories = getattr(target, "_histories", None)
    if histories is not None:
        history = histories.store.versions(KEYED)
        rows = pa.concat_tables([rows, history], promote_options="default")
    names = sorted(rows.column_names)
    return sorted(tuple(str(row[name]) for name in names) for row in rows.to_pylist())


def main(root: str, seed: int) -> None:
    """Stage the seed's micro-batches into a Delta and an Iceberg copy under ``root``."""
    from pgshovel.replication.config import SparkSettings
    from pgshovel.replication.spark import spark_session

    spark = spark_session(SparkSettings(master="local[2,2]", conf={"spark.ui.enabled": "false"}))
    try:
        for kind in ("delta", "iceberg"):
            target = start(kind, Path(root) / kind)
            number = 0
            for micro_batch, (_parts, _whole, batch_ids, tasks) in enumerate(plan(seed)[:RETRIED]):
                number += len(batch_ids)
                stages = stage_micro_batch(
                    spark, target, f"r{micro_batch}", tasks, batch_ids, number, fail_first=True
                )
                print(kind, " ".join(Path(stage.path).name for stage in stages), flush=True)
            target.close()
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
