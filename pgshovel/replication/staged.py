"""The staged apply on the driver: plan a micro-batch's Spark tasks, run them, commit once.

docs/scale-out.md "Stage in parallel, commit once". The driver has validated
the micro-batch (every partition, joined at common batch boundaries);
``Stager`` decides whether it may take the staged path — whole ROWS batches, no
schema change or watermark, the snapshot handoff over, no incremental snapshot
under way, no broken table, every table in the shape the copy has, at least
``stage_min_mutations`` row changes, a target that stages — and otherwise
leaves it to the driver path unchanged. Staged: one Spark task per run of a
partition's messages (cut at batch boundaries, about ``stage_task_rows`` row
changes each, ``TASK_ROWS`` by default) reads exactly the messages the driver
validated (offset, publisher, sequence, batch: ``staging.task``), reduces them
to the net effect per key and stages it in the target under its attempt's own
names (PostgreSQL: unlogged tables, ``staging.postgres``; Delta and Iceberg:
Parquet files, ``staging.tablefmt``); the driver then commits the micro-batch
with the worker's state through the target (PostgreSQL: one transaction; the
table formats: their micro-batch commit) and drops the micro-batch's stages.
Nothing of it is visible before that commit.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pgshovel import errors
from pgshovel.errors import DataError, PgshovelError, TransientError
from pgshovel.replication.staging.reduce import shape_matches
from pgshovel.replication.staging.task import StageTask, Take, run_stage_task
from pgshovel.stream.batches import CommittedBatch, RowMutations, RowsMessage
from pgshovel.stream.partitions import JoinedMutations
from pgshovel.stream.state import WorkerState

__all__ = ["TASK_ROWS", "Stager", "partition_runs", "stager_for", "task_failure"]

logger = logging.getLogger(__name__)

#: about how many row changes one staging task reads (runs are cut at batch boundaries)
TASK_ROWS = 100_000


def _partition_messages(batch: CommittedBatch) -> list[tuple[int, tuple[RowsMessage, ...]]] | None:
    """The ROWS messages of a batch per partition, None if the batch is not all ROWS."""
    mutations = batch.mutations
    if isinstance(mutations, JoinedMutations):
        out = []
        for partition, part in enumerate(mutations.parts):
            if isinstance(part, RowMutations):
                out.append((partition, part.messages))
            elif len(part):
                return None
        return out
    if isinstance(mutations, RowMutations):
        return [(0, mutations.messages)]
    return None if len(mutations) else []


def partition_runs(
    batches: Sequence[CommittedBatch], task_rows: int = TASK_ROWS
) -> list[tuple[int, tuple[Take, ...]]] | None:
    """The tasks of a micro-batch: per partition, runs of ``Take``s cut at batch boundaries
    once they hold ``task_rows`` row changes; None if a batch is not all ROWS."""
    runs: dict[int, list[list[Take]]] = {}
    counts: dict[int, int] = {}
    for ordinal, batch in enumerate(batches):
        messages = _partition_messages(batch)
        if messages is None:
            return None
        for partition, held in messages:
            if not held:
                continue
            mine = runs.setdefault(partition, [[]])
            if counts.get(partition, 0) >= task_rows:
                mine.append([])
                counts[partition] = 0
            mine[-1].extend(
                Take(message.offset, ordinal, batch.batch_id, message.publisher, message.sequence)
                for message in held
            )
            counts[partition] = counts.get(partition, 0) + sum(m.rows.count for m in held)
    return [(partition, tuple(run)) for partition in sorted(runs) for run in runs[partition] if run]


def _shapes_match(batches: Sequence[CommittedBatch], state: WorkerState) -> bool:
    known = {table.identity: table for table in state.tables}
    seen: set[bytes] = set()
    for batch in batches:
        for _partition, messages in _partition_messages(batch) or []:
            for message in messages:
                for entry in message.rows.tables:
                    raw = entry.SerializeToString()
                    if raw in seen:
                        continue
                    seen.add(raw)
                    shape = known.get((entry.shape.schema, entry.shape.name))
                    if shape is None or not shape_matches(entry.shape, shape):
                        return False
    return True


class Stager:
    """Applies eligible micro-batches through Spark tasks and one target commit."""

    def __init__(
        self,
        spark: Any,
        target: Any,
        consumer: Mapping[str, str],
        topic: str,
        min_mutations: int,
        task_rows: int = TASK_ROWS,
    ) -> None:
        self.spark = spark
        self.target = target
        self.consumer = dict(consumer)
        self.topic = topic
        self.min_mutations = min_mutations
        self.task_rows = task_rows
        #: False: every micro-batch takes the driver path (no Spark to stage with, or a stream
        #: or target that cannot stage)
        self.enabled = (
            spark is not None
            and target is not None
            and callable(getattr(target, "stage_sink", None))
        )
        #: micro-batches applied on the staged path (and their Spark tasks)
        self.staged = 0
        self.tasks = 0

    def eligible(
        self, batches: Sequence[CommittedBatch], state: WorkerState, driver_only: bool
    ) -> bool:
        """Whether the micro-batch takes the staged path (see the module documentation);
        ``driver_only``: the snapshot handoff is under way, or a batch's parts are open."""
        if not self.enabled or driver_only or state.tasks or state.broken or not batches:
            return False
        if getattr(self.target, "audit", False):
            return False
        if any(not batch.complete or batch.markers for batch in batches):
            return False
        if sum(len(batch.mutations) for batch in batches) < self.min_mutations:
            return False
        if any(_partition_messages(batch) is None for batch in batches):
            return False
        return _shapes_match(batches, state)

    def apply(self, batches: Sequence[CommittedBatch], state: WorkerState) -> int:
        """Stage ``batches`` on the executors and commit them with ``state``; the rows written."""
        runs = partition_runs(batches, self.task_rows)
        if runs is None:  # pragma: no cover - eligible() checked it
            raise ValueError("a micro-batch with per-mutation messages cannot be staged")
        micro_batch = uuid.uuid4().hex[:8]
        sink, prefix = self.target.stage_sink(micro_batch)
        tasks = [
            StageTask(
                number=number,
                consumer=self.consumer,
                topic=self.topic,
                partition=partition,
                takes=takes,
                shapes=state.tables,
                sink=sink,
            )
            for number, (partition, takes) in enumerate(runs)
        ]
        started = time.monotonic()
        stages: list[Any] = []
        if tasks:
            context = self.spark.sparkContext
            try:
                results = context.parallelize(tasks, len(tasks)).map(run_stage_task).collect()
            except Exception as error:  # py4j's: the failure of a task Spark gave up on
                raise task_failure(error) from error
            for staged in results:
                stages.extend(staged)
        staged_at = time.monotonic()
        rows = int(self.target.commit_stages(prefix, stages, state))
        self.staged += 1
        self.tasks += len(tasks)
        logger.info(
            "staged micro-batch %s: %d batch(es) in %d task(s), %d stage(s) in %.3fs, "
            "committed once in %.3fs",
            micro_batch,
            len(batches),
            len(tasks),
            len(stages),
            staged_at - started,
            time.monotonic() - staged_at,
        )
        return rows


def task_failure(error: Exception) -> PgshovelError:
    """The pgshovel error of a staging job that failed: a task's data error as itself (the
    worker follows ``on_error``), anything else transient (the worker starts over from the
    stored position and stages the micro-batch again)."""
    text = str(error)
    found = re.findall(r"pgshovel\.errors\.(\w+): ([^\n]*)", text)
    if found:
        name, detail = found[-1]
        kind = getattr(errors, name, None)
        if isinstance(kind, type) and issubclass(kind, DataError):
            return kind(f"a staging task failed: {detail}")
    else:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        detail = lines[0] if lines else type(error).__name__
    return TransientError(f"a staging task failed ({detail}); the micro-batch is staged again")


def stager_for(spark: Any, configuration: Any) -> Stager:
    """The worker's stager: enabled for a Kafka stream into a target that stages."""
    from pgshovel.replication.streams import KafkaStream
    from pgshovel.stream.reader import consumer_settings

    stream, target = configuration.stream, configuration.target
    if not isinstance(stream, KafkaStream) or not stream.topic:
        return Stager(spark, None, {}, "", configuration.stage_min_mutations)
    return Stager(
        spark,
        target,
        consumer_settings(stream.bootstrap_servers, stream.properties),
        stream.topic,
        configuration.stage_min_mutations,
        configuration.stage_task_rows,
    )
