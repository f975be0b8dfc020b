"""Incremental snapshots while streaming: backfill, re-snapshot, verify and repair, chunk by chunk.

A ``SnapshotTask`` (stored in the worker state, so a crash loses nothing) is
planned into key ranges; each range is read as a chunk between a low and a high
watermark written into the set's queue (``pgshovel.source.read_chunk``), by a
small pool of reader threads while the worker keeps applying the stream. The
worker follows the watermarks in the stream: from the batch holding a chunk's
low watermark to the end of the micro-batch holding its high one, every key of
the chunk's table the stream changed is collected. Whole batches count, which
is what makes it exact although a PgQ batch orders events by id, not commit:
a change committed before the chunk was read lies in an earlier batch or in
the low watermark's batch; one committed after it, in the high watermark's
batch or a later one. Once that micro-batch is applied, the target makes the
chunk's range hold the staged rows except the changed keys (whose state the
stream already brought), and stores the task's progress in the same
transaction. A table without a key is one chunk, and no key tells which of its
rows the stream changed: its mutations from the low watermark's batch on are
kept instead, and those whose transaction the read's snapshot does not see are
replayed on the staged rows (exactly the loader's handoff rule), so the copy is
exact however busy the table is. A TRUNCATE or schema change of the table while
a chunk is open, or a chunk whose watermarks were lost with a restart, is
simply read again.

Verify chunks stage the source's checksums instead of rows and compare them
with the copy's after the same micro-batch; buckets holding changed keys are
left out and the chunk is read again until every bucket compared (or
``max_attempts``). An unkeyed table's copy is compared as of the read: the
effect of the mutations to replay is taken out of the copy's checksums. Repair
re-snapshots just the ranges a verify found different; once it is done, those
ranges are verified again (``pgshovel.replication.requests.follow_ups``).
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from pgshovel._numbers import MIN_RATE_SECONDS, rate, rows_of_estimate
from pgshovel.abc import ChunkSink, ChunkTarget
from pgshovel.cluster import names
from pgshovel.errors import PgshovelError, ProgrammingError, TransientError
from pgshovel.replication.flights import Flight, Progress, Verdict
from pgshovel.source import (
    Chunk,
    KeyRange,
    StagedChunk,
    TableShape,
    connect,
    read_chunk,
    sample_boundaries,
)
from pgshovel.stream.plan import MicroBatchPlan
from pgshovel.stream.state import Bound, Purpose, SnapshotTask, WorkerState

logger = logging.getLogger(__name__)


def attempt_prefix(cluster: str, set_name: str) -> str:
    """What every chunk attempt of a set is named with first (staging is shared by sets)."""
    return hashlib.sha1(f"{cluster}.{set_name}".encode(), usedforsecurity=False).hexdigest()[:6]


def new_task(
    table: TableShape, purpose: Purpose, where: str = "", origin: str = "", repair: bool = False
) -> SnapshotTask:
    return SnapshotTask(
        id=uuid.uuid4().hex[:12],
        schema=table.schema,
        table=table.name,
        purpose=purpose,
        where=where,
        origin=origin,
        repair=repair,
    )


class IncrementalSnapshots:
    """Runs the worker state's snapshot tasks; call ``after`` once per applied micro-batch."""

    def __init__(
        self,
        cluster: str,
        set_name: str,
        source_dsn: str,
        target: ChunkTarget,
        *,
        rows_per_chunk: int = 20_000,
        parallel: int = 2,
        max_attempts: int = 5,
        on_finished: Callable[[SnapshotTask, WorkerState], list[SnapshotTask]] = (
            lambda task, state: []
        ),
        on_failed: Callable[[str, str], None] = lambda origin, reason: None,
    ) -> None:
        self.cluster = cluster
        self.queue = names.queue_name(cluster, set_name)
        self.prefix = attempt_prefix(cluster, set_name)
        self.source_dsn = source_dsn
        self.target = target
        self.rows_per_chunk = rows_per_chunk
        self.max_attempts = max_attempts
        self.on_finished = on_finished
        self.on_failed = on_failed
        self._sink: ChunkSink | None = None
        self._pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="chunk")
        self._parallel = parallel
        self._flights: dict[str, Flight] = {}
        self._verdicts: dict[tuple[str, int], Verdict] = {}
        self._progress: dict[str, Progress] = {}

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._flights.clear()

    @property
    def busy(self) -> bool:
        return bool(self._flights)

    @property
    def tables_in_flight(self) -> set[tuple[str, str]]:
        """The tables a chunk is being read of (whose changed keys ``after`` needs)."""
        return {flight.chunk.key_range.table.identity for flight in self._flights.values()}

    # -- tasks -------------------------------------------------------------------

    def with_tasks_of(self, plan: MicroBatchPlan, state: WorkerState) -> WorkerState:
        """``state`` with a task per table the plan must copy again, restarting tasks whose
        table changed shape, and without tasks of tables no longer in the set."""
        known = {table.identity for table in state.tables}
        changed = {name for changes in plan.batches for name in changes.whole}
        recopy = {table.identity: (table, reason) for table, reason in plan.recopy}
        tasks: list[SnapshotTask] = []
        for task in state.tasks:
            if task.identity not in known or task.identity in recopy:
                continue
            if task.identity in changed and task.planned:
                logger.info("%s.%s changed shape: its %s starts over", *task.identity, task.purpose)
                task = task.restarted()
            tasks.append(task)
        for table, reason in recopy.values():
            purpose: Purpose = "backfill" if reason == "added to the set" else "resnapshot"
            logger.warning(
                "%s: %s; it is copied again while the stream goes on", table.qualified, reason
            )
            tasks.append(new_task(table, purpose))
        return state.replace(tasks=tuple(tasks))

    # -- the loop ----------------------------------------------------------------

    def after(self, plan: MicroBatchPlan | None, state: WorkerState) -> WorkerState:
        """Follow the micro-batch just applied, merge or compare what is ready, start reads.

        Returns the state after that (stored whenever it changed)."""
        if plan is not None:
            self._observe(plan)
        state = self._finish_ready(state)
        state = self._plan_tasks(state)
        self._launch(state)
        return state

    def _observe(self, plan: MicroBatchPlan) -> None:
        for changes in plan.batches:
            marks = {mark.request for mark in changes.watermarks}
            for flight in self._flights.values():
                identity = flight.chunk.key_range.table.identity
                if flight.chunk.low in marks:
                    flight.opened = True
                if not flight.opened:
                    continue
                if identity in changes.whole:
                    flight.invalid = "the table was truncated or changed shape while it was read"
                if flight.chunk.key_range.table.key:
                    flight.changed |= changes.keys.get(identity, set())
                else:
                    flight.mutations.extend(changes.unkeyed_of({identity}).get(identity, ()))
                if flight.chunk.high in marks:
                    flight.ready = True

    def _finish_ready(self, state: WorkerState) -> WorkerState:
        for attempt, flight in list(self._flights.items()):
            if flight.future.done() and flight.future.exception() is not None:
                del self._flights[attempt]
                state = self._failed(state, flight, flight.future.exception())
                continue
            if not flight.ready:
                continue
            staged = flight.future.result()  # the high watermark is written last: it is done
            del self._flights[attempt]
            task = _task(state, flight.task)
            if task is None or flight.invalid:
                if flight.invalid:
                    logger.info(
                        "%s: range %d read again: %s",
                        flight.chunk.key_range.table.qualified,
                        flight.index,
                        flight.invalid,
                    )
                self.target.drop_staging([attempt])
                continue
            try:
                state = self._complete(state, task, flight, staged)
            except PgshovelError as error:
                if not _lasting(error) or not task.origin:
                    raise
                state = self._give_up(state, task, attempt, error)
        return state

    def _failed(
        self, state: WorkerState, flight: Flight, error: BaseException | None
    ) -> WorkerState:
        table = flight.chunk.key_range.table.qualified
        if isinstance(error, TransientError):
            logger.warning(
                "reading range %d of %s failed (%s); it is read again", flight.index, table, error
            )
            return state
        task = _task(state, flight.task)
        if task is None:  # its request was refused meanwhile: nothing waits for this read
            self.target.drop_staging([flight.chunk.attempt])
            return state
        if isinstance(error, PgshovelError) and _lasting(error) and task.origin:
            return self._give_up(state, task, flight.chunk.attempt, error)
        if isinstance(error, PgshovelError):
            raise error
        raise RuntimeError(f"reading range {flight.index} of {table} failed: {error}") from error

    def _give_up(
        self, state: WorkerState, task: SnapshotTask, attempt: str, error: PgshovelError
    ) -> WorkerState:
        """A request's task failed for a lasting reason: drop every task of that request,
        refuse it with the reason, and go on streaming (its other chunks in flight are
        dropped when they land, their task gone)."""
        reason = f"{task.purpose} of {task.schema}.{task.table} failed: {error}"
        dropped = {t.id for t in state.tasks if t.origin == task.origin}
        self.target.drop_staging([attempt])
        for key in [key for key in self._verdicts if key[0] in dropped]:
            del self._verdicts[key]
        for task_id in dropped:
            self._progress.pop(task_id, None)
        state = state.replace(tasks=tuple(t for t in state.tasks if t.id not in dropped))
        self.target.store_state(state)
        logger.error("%s; the request is refused, the stream goes on", reason)
        self.on_failed(task.origin, reason)
        return state

    def _complete(
        self, state: WorkerState, task: SnapshotTask, flight: Flight, staged: StagedChunk
    ) -> WorkerState:
        rows = staged.rows
        replay = flight.replay(staged)
        if task.purpose == "verify":
            comparison = self.target.compare_chunk(flight.chunk, flight.changed, replay=replay)
            verdict = self._verdicts.setdefault((task.id, flight.index), Verdict())
            verdict.add(comparison)
            if verdict.pending and verdict.attempts < self.max_attempts:
                return state  # writes touched some buckets: compare those again later
            self._verdicts.pop((task.id, flight.index), None)
            difference: tuple[tuple[int, int, int, int], ...] = ()
            if verdict.differing:
                source = sum(rows for rows, _ in verdict.differing.values())
                copy = sum(rows for _, rows in verdict.differing.values())
                difference = ((flight.index, source, copy, len(verdict.differing)),)
            elif verdict.pending:
                logger.warning(
                    "verify of %s: %d bucket(s) of range %d changed at every one of %d "
                    "comparisons; they are reported as not verified",
                    flight.chunk.key_range.table.qualified,
                    len(verdict.pending),
                    flight.index,
                    verdict.attempts,
                )
            updated = task.record(flight.index, rows, difference)
            state = _with(state, updated)
            self.target.store_state(state)
        else:
            updated = task.record(flight.index, rows, ())
            state = _with(state, updated)
            self.target.merge_chunk(flight.chunk, flight.changed, state, replay=replay)
        self._log(updated, rows)
        if updated.finished:
            self._progress.pop(updated.id, None)
            follow = self.on_finished(updated, state)
            remaining = tuple(t for t in state.tasks if t.id != updated.id)
            state = state.replace(tasks=(*remaining, *follow))
            self.target.store_state(state)
        return state

    def _log(self, task: SnapshotTask, rows: int) -> None:
        """A line per range done: the rate counts this process's rows of the task over the
        time since its first range was started here (a repair's ranges took microseconds
        to log from a clock started at their end: "439657058 rows/s")."""
        progress = self._progress.setdefault(task.id, Progress())
        progress.rows += rows
        seconds = time.monotonic() - progress.started
        per_second = progress.rows / seconds if seconds >= MIN_RATE_SECONDS else 0.0
        remaining = max(0, task.estimate - task.rows)
        eta = f"ETA {remaining / per_second:.0f}s" if per_second > 0 else "ETA n/a"
        logger.info(
            "%s of %s.%s: range %d/%d, %s (%s, %s)",
            task.purpose,
            task.schema,
            task.table,
            len(task.done),
            len(task.ranges),
            rows_of_estimate(task.rows, task.estimate),
            rate(progress.rows, seconds, "rows"),
            eta,
        )

    def _plan_tasks(self, state: WorkerState) -> WorkerState:
        planned = False
        for task in state.tasks:
            if task.planned:
                continue
            table = state.table(task.schema, task.table)
            if table is None:
                continue
            connection = connect(self.source_dsn, "pgshovel-replicate chunk plan", autocommit=True)
            try:
                boundaries, total = sample_boundaries(connection, table, self.rows_per_chunk)
            finally:
                connection.close()
            lowers: list[Bound] = [None, *boundaries]
            uppers: list[Bound] = [*boundaries, None]
            ranges = tuple(zip(lowers, uppers, strict=True))
            state = _with(state, task.plan(ranges, total))
            self._progress[task.id] = Progress()
            planned = True
            logger.info(
                "%s of %s: ~%d rows in %d range(s)",
                task.purpose,
                table.qualified,
                total,
                len(ranges),
            )
        if planned:
            self.target.store_state(state)
        return state

    def _launch(self, state: WorkerState) -> None:
        if self._sink is None:
            self._sink = self.target.chunk_sink()
        flying = {(flight.task, flight.index) for flight in self._flights.values()}
        for task in state.tasks:
            table = state.table(task.schema, task.table)
            if table is None or not task.planned:
                continue
            for index in task.pending():
                if len(self._flights) >= self._parallel:
                    return
                if (task.id, index) in flying:
                    continue
                lower, upper = task.ranges[index]
                attempt = f"{self.prefix}{task.id}.{index}.{uuid.uuid4().hex[:6]}"
                chunk = Chunk(
                    attempt,
                    self.queue,
                    KeyRange(table, index, lower, upper),
                    task.where,
                    checksums=task.purpose == "verify",
                    cluster=self.cluster,
                )
                # the task's clock starts with its first range here, whoever planned it
                self._progress.setdefault(task.id, Progress())
                future = self._pool.submit(self._read, chunk, self._sink)
                self._flights[attempt] = Flight(chunk, task.id, index, future)

    def _read(self, chunk: Chunk, sink: ChunkSink) -> StagedChunk:
        return read_chunk(
            self.source_dsn,
            chunk,
            lambda copy_out: sink.stage_rows(
                chunk.attempt, chunk.key_range.table, copy_out, selected=bool(chunk.where)
            ),
            lambda checksums: sink.stage_checksums(chunk.attempt, checksums),
        )


def _lasting(error: PgshovelError) -> bool:
    """Whether ``error`` ends a request: not a fault that passes (retried) nor a bug."""
    return not isinstance(error, (TransientError, ProgrammingError))


def _task(state: WorkerState, task_id: str) -> SnapshotTask | None:
    return next((task for task in state.tasks if task.id == task_id), None)


def _with(state: WorkerState, task: SnapshotTask) -> WorkerState:
    return state.replace(tasks=tuple(task if t.id == task.id else t for t in state.tasks))


def add_tasks(state: WorkerState, tasks: Iterable[SnapshotTask]) -> WorkerState:
    """``state`` with ``tasks`` appended."""
    return state.replace(tasks=(*state.tasks, *tasks))
