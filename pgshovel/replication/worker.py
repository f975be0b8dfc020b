"""The replication worker: snapshot if needed, then apply the stream micro-batch by micro-batch.

Order of effects, which crash safety rests on:

1. the target returns its stored state (taking a lock so one worker runs per set);
2. with no state, or a snapshot load that never finished: note the stream's
   position at the topic's end, export the source snapshot, record phase
   ``snapshot`` (the target empties the set's tables), copy every range, then
   record phase ``streaming`` with that position and snapshot;
3. for each micro-batch: drop mutations the snapshot already holds (handoff),
   then apply the batches and store the position of the last Commit in the
   same target transaction. Nothing is acknowledged anywhere else: the Kafka
   position lives only in the target. A source transaction too large to hold
   (more than the stream's ``part_mutations``) arrives in parts: each is
   applied in the one open target transaction without storing anything, and
   the batch's last part commits them all with its position; a batch that rolls
   back instead (a relay that died mid-batch) has its parts discarded
   (``Target.abandon``), and no other duty runs while parts are open.

``should_stop`` is checked between micro-batches, so a stop request ends the
worker after the current micro-batch is applied. A transient failure anywhere
starts over from 1 after a backoff; the stored state makes that exact.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from psycopg2.extensions import connection as Connection

from pgshovel._numbers import rate
from pgshovel.abc import ChunkTarget, TableLoadReport
from pgshovel.cluster import names
from pgshovel.cluster.dsn import mask_dsn, stored_password_warning
from pgshovel.cluster.watch import SetWatch
from pgshovel.errors import CoordinatorUnavailable, DatabaseUnavailable, PgshovelError
from pgshovel.policy import ErrorPolicy
from pgshovel.protocol import configuration_pb2
from pgshovel.protocol.stream_pb2 import SchemaChange
from pgshovel.replication import capabilities, catalog
from pgshovel.replication.config import ReplicationConfiguration
from pgshovel.replication.holds import hold
from pgshovel.replication.incremental import IncrementalSnapshots
from pgshovel.replication.metrics import WorkerMetrics
from pgshovel.replication.mutations import key_text
from pgshovel.replication.requests import RequestDesk
from pgshovel.replication.staged import Stager, stager_for
from pgshovel.replication.status import StatusBoard
from pgshovel.replication.targets import copy_name
from pgshovel.source import TableShape, connect, with_source_connection
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.handoff import HandoffFilter, Snapshot, parse_txid_snapshot
from pgshovel.stream.plan import (
    BatchChanges,
    MicroBatchPlan,
    SchemaStep,
    join_parts,
    plan_micro_batch,
)
from pgshovel.stream.state import SnapshotTask, WorkerState

logger = logging.getLogger(__name__)


def read_table_shapes(
    set_configuration: configuration_pb2.ReplicationSetConfiguration,
) -> list[TableShape]:
    """The set's tables as the source catalog describes them."""
    connection = connect(set_configuration.database.dsn, "pgshovel-replicate")
    try:
        return catalog.set_shapes(connection, set_configuration)
    finally:
        connection.close()


def end_horizon(batch: CommittedBatch) -> str:
    """The txid snapshot of the batch's end tick (text), "" when the relay sent none: every
    transaction visible in it had its events in this batch or an earlier one."""
    end = batch.begin.end
    return Snapshot.from_protobuf(end.snapshot).to_text() if end.HasField("snapshot") else ""


def _log_applied(
    counts: tuple[int, int, int], seconds: float, state: WorkerState, lag: float, behind: int
) -> None:
    """One line per micro-batch with mutations (DEBUG without): ``counts`` are its batches,
    mutations and rows; the seconds are those of applying it (from its first part for a
    batch in parts), the lag runs from the source commit."""
    batches, mutations, rows = counts
    logger.log(
        logging.INFO if mutations else logging.DEBUG,
        "applied %d batch(es), %d mutation(s), %d row(s) in %.3fs of applying (%s); "
        "position %s, lag %.3fs from source commit, %d message(s) behind",
        batches,
        mutations,
        rows,
        seconds,
        rate(mutations, seconds, "mutations"),
        state.position.describe(),
        lag,
        behind,
    )


def _sleeper(should_stop: Callable[[], bool]) -> Callable[[float], None]:
    """A sleep that returns early, within a tenth of a second, once ``should_stop()``."""

    def sleep(seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not should_stop() and time.monotonic() < deadline:
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))

    return sleep


class Worker:
    """Replicates one set of one cluster with the configured loader, stream and target."""

    def __init__(
        self,
        cluster: str,
        set_name: str,
        set_configuration: configuration_pb2.ReplicationSetConfiguration,
        configuration: ReplicationConfiguration,
        spark: Any,
        zookeeper_hosts: str | None = None,
    ) -> None:
        self.zookeeper_hosts = zookeeper_hosts
        self.cluster = cluster
        self.set_name = set_name
        if zookeeper_hosts is None and (
            warning := stored_password_warning(set_name, set_configuration.database.dsn)
        ):
            logger.warning("%s", warning)  # (a watched set warns when it is read)
        #: the set: ``set_configuration`` until the first start watches it in ZooKeeper
        self.set_watch = SetWatch.fixed(set_name, set_configuration)
        # Every source connection of the worker (driver and Spark tasks) logs in this way.
        self.set_configuration = with_source_connection(
            set_configuration, configuration.source_connection
        )
        self.configuration = configuration
        self.spark = spark
        self.load_reports: list[TableLoadReport] = []
        #: the last state stored in the target (None until known)
        self.state: WorkerState | None = None
        self.metrics = WorkerMetrics()
        self._should_stop: Callable[[], bool] = lambda: False

    def run(self, should_stop: Callable[[], bool] = lambda: False) -> WorkerState | None:
        """Load if needed and stream until ``should_stop()``; return the last stored state.

        A transient failure (a lost connection, an unavailable broker) closes
        everything and starts over from the state stored in the target, after a
        backoff; a data error does the same after ``retry_interval`` with
        ``on_error: log``, and ends the worker with ``exit``; any other failure
        ends the worker (see ``pgshovel.policy``).
        """
        settings = self.configuration
        policy = ErrorPolicy(
            settings.on_error,
            _sleeper(should_stop),
            logger,
            retry_interval=settings.retry_interval,
            max_backoff=settings.max_backoff,
        )
        self._should_stop = should_stop
        try:
            while True:
                try:
                    return self._run(should_stop, self._succeeded(policy))
                except PgshovelError as error:
                    self.metrics.failed(error)
                    self.metrics.discarded()
                    policy.failed(error)
                    if should_stop():
                        return self.state
        finally:
            self.set_watch.close()

    def _succeeded(self, policy: ErrorPolicy) -> Callable[[], None]:
        def succeeded() -> None:
            self.metrics.succeeded()
            policy.succeeded()

        return succeeded

    def _run(
        self, should_stop: Callable[[], bool], on_success: Callable[[], None]
    ) -> WorkerState | None:
        stream = self.configuration.stream
        target = self.configuration.target
        self._follow_set()
        stream.open(names.topic_name(self.cluster, self.set_name))
        desk = (
            None
            if self.zookeeper_hosts is None
            else RequestDesk(
                self.zookeeper_hosts,
                self.cluster,
                self.set_name,
                self.set_configuration.database.dsn,
                target,
            )
        )
        board = (
            None
            if desk is None
            else StatusBoard(
                desk.zookeeper,
                self.cluster,
                self.set_name,
                type(target).__name__,
                copy=copy_name(target),
            )
        )
        snapshots = self._incremental(target, desk) if isinstance(target, ChunkTarget) else None
        logger.info("target %s offers %s", type(target).__name__, capabilities.describe(target))
        try:
            state = target.open(self.cluster, self.set_name)
            if board is not None:
                board.keep_fresh(self.metrics)  # this worker holds the copy: it shows from now
            on_success()
            if state is None or state.phase == "snapshot":
                if state is not None:
                    logger.warning(
                        "the previous snapshot load did not finish; emptying the set's tables "
                        "and loading again"
                    )
                state = self.load(state)
            else:
                if not state.tables:
                    # A state stored before pgshovel 0.2: the source catalog has the shapes.
                    state = state.replace(tables=tuple(read_table_shapes(self.set_configuration)))
                logger.info("resuming the stream at position %s", state.position.describe())
            if isinstance(target, ChunkTarget):
                target.drop_staging()
            self.state = state
            return self.stream(state, should_stop, on_success, snapshots, desk, board)
        finally:
            if board is not None:
                board.close()
            if snapshots is not None:
                snapshots.close()
            if desk is not None:
                desk.close()
            stream.close()
            target.close()

    def _follow_set(self) -> None:
        """Take the set as it is now (``set failover`` may have moved it), watching it in
        ZooKeeper from the first start that reaches it; the stream loop then leaves a moved
        database between micro-batches (never with parts of a batch uncommitted)."""
        if self.zookeeper_hosts is not None and not self.set_watch.watching:
            before = self.set_watch.current().dsn
            try:
                self.set_watch = SetWatch.open(self.zookeeper_hosts, self.cluster, self.set_name)
            except CoordinatorUnavailable as error:
                logger.warning(
                    "cannot watch set %r in zookeeper (%s): keeping database %r",
                    self.set_name,
                    error,
                    mask_dsn(before),
                )
            else:
                if self.set_watch.current().dsn != before:
                    logger.warning(
                        "set %r moved to database %r",
                        self.set_name,
                        mask_dsn(self.set_watch.current().dsn),
                    )
        current = self.set_watch.follow()
        self.set_configuration = with_source_connection(
            current.configuration, self.configuration.source_connection
        )

    def _read_set(self) -> configuration_pb2.ReplicationSetConfiguration:
        """The set read from ZooKeeper now; the last one read when ZooKeeper cannot answer
        (what the snapshot copies follows the source's capture anyway)."""
        try:
            return self.set_watch.refresh().configuration
        except CoordinatorUnavailable as error:
            logger.warning(
                "cannot read set %r from zookeeper (%s): the snapshot follows the source's "
                "capture with the set as last read",
                self.set_name,
                error,
            )
            return self.set_watch.current().configuration

    def _incremental(self, target: ChunkTarget, desk: RequestDesk | None) -> IncrementalSnapshots:
        settings = self.configuration.snapshots

        def on_finished(task: SnapshotTask, state: WorkerState) -> list[SnapshotTask]:
            logger.info(
                "%s of %s.%s finished: %d row(s) in %d range(s)",
                task.purpose,
                task.schema,
                task.table,
                task.rows,
                len(task.ranges),
            )
            return [] if desk is None else desk.finished(task, state)

        return IncrementalSnapshots(
            self.cluster,
            self.set_name,
            self.set_configuration.database.dsn,
            target,
            rows_per_chunk=settings.rows_per_chunk,
            parallel=settings.parallel,
            on_finished=on_finished,
            on_failed=(lambda origin, reason: None) if desk is None else desk.refuse,
        )

    def load(self, stored: WorkerState | None = None) -> WorkerState:
        """Copy a consistent snapshot of every table; return the streaming state after it
        (``stored``: what the target held, a load that did not finish, or None).

        The tables are read in the exporting transaction, right after the export:
        the set as ZooKeeper says then, each table as the snapshot captures it
        (``catalog.snapshot_shapes``), so the stream from the position noted before
        the export holds exactly what the copy lacks, ``set update`` included."""
        target = capabilities.snapshot_target(
            self.configuration.target, stored, self.cluster, self.set_name
        )
        hold("before-export", self._should_stop)
        start = self.configuration.stream.start_position()
        begun: list[WorkerState] = []

        def read_tables(connection: Connection) -> list[TableShape]:
            hold("after-export", self._should_stop)
            configuration = self._read_set()
            return catalog.snapshot_shapes(connection, self.cluster, self.set_name, configuration)

        def on_exported(txid_snapshot: str, tables: list[TableShape]) -> None:
            state = WorkerState("snapshot", txid_snapshot, start, tables=tuple(tables))
            begun.append(state)
            target.begin_snapshot(state)
            hold("loading", self._should_stop)

        self.load_reports = self.configuration.loader.load(
            self.spark,
            self.set_configuration.database.dsn,
            read_tables,
            target.snapshot_sink(),
            on_exported,
        )
        state = begun[0].replace(phase="streaming")
        target.finish_snapshot(state)
        logger.info(
            "snapshot loaded: %d rows in %d table(s); streaming from %s",
            sum(report.rows for report in self.load_reports),
            len(self.load_reports),
            start.describe(),
        )
        return state

    def stream(
        self,
        state: WorkerState,
        should_stop: Callable[[], bool],
        on_success: Callable[[], None] = lambda: None,
        snapshots: IncrementalSnapshots | None = None,
        desk: RequestDesk | None = None,
        board: StatusBoard | None = None,
    ) -> WorkerState:
        """Apply micro-batches until ``should_stop()``; return the last stored state."""
        handoff = HandoffFilter(parse_txid_snapshot(state.snapshot))
        target = self.configuration.target
        metrics = self.metrics
        metrics.streaming = True
        metrics.state = state
        #: the changes of a batch whose parts are applied but not committed
        parts: list[BatchChanges] = []
        in_parts = 0
        #: when the first part of the batch in parts began to be applied
        parts_began: float | None = None
        committed = state
        stager = stager_for(self.spark, self.configuration)
        for micro_batch in self.configuration.stream.micro_batches(state, should_stop):
            self._check_moved(parts)
            if micro_batch.abandon and parts:
                state = self._abandon(parts, committed)
                parts, in_parts, parts_began = [], 0, None
            if parts and not micro_batch.batches:
                continue  # no other duty while a batch's parts are uncommitted
            if not micro_batch.batches:
                # Idle: take requests, start and finish incremental snapshot chunks.
                state = self.state = committed = self._duties(state, None, snapshots, desk)
                metrics.idle(state, micro_batch.lag)
                if board is not None:
                    board.publish(metrics)
                on_success()
                continue
            started = time.monotonic()
            batches = [handoff.filter(batch) for batch in micro_batch.batches]
            # Read after filtering: a micro-batch whose first batch ends the handoff (a
            # restart's first) may stage; a batch the handoff changed holds the mutations it
            # kept, which never stage.
            handoff_active = handoff.active
            metrics.read(batches)
            staged = stager.eligible(batches, state, handoff_active or bool(parts))
            logger.debug(
                "micro-batch of %d batch(es) up to %s: %s path",
                len(batches),
                batches[-1].position.describe() if batches else "-",
                "staged" if staged else "driver",
            )
            if staged:
                state = committed = self._apply_staged(
                    stager, batches, state, started, micro_batch.lag, snapshots, desk, board
                )
                on_success()
                continue
            plan = plan_micro_batch(
                batches,
                state.tables,
                state.broken,
                can_alter_type=target.can_alter_type,
                key_text=key_text,
            )
            self._report_broken(plan, state)
            capabilities.check_recopy(target, plan)
            if not batches[-1].complete:
                parts_began = parts_began or started
                state = self._apply_part(plan, state, snapshots, parts)
                in_parts += len(batches[-1].mutations)
                continue
            state = state.replace(
                position=batches[-1].position,
                tables=plan.tables,
                broken=plan.broken,
                horizon=end_horizon(batches[-1]) or state.horizon,
            )
            if snapshots is not None:
                state = snapshots.with_tasks_of(plan, state)
            rows = target.apply(plan, state)
            self.state = state
            if parts:
                # The batch that came in parts counts whole for incremental snapshots.
                flying = set() if snapshots is None else snapshots.tables_in_flight
                joined = join_parts([*parts, plan.batches[0]], flying)
                plan = dataclasses.replace(plan, batches=(joined, *plan.batches[1:]))
                parts = []
            on_success()
            mutations = sum(len(batch.mutations) for batch in batches) + in_parts
            # A batch applied in parts counts from its first part: its mutations are all of them.
            began = parts_began or started
            in_parts, parts_began = 0, None
            lag = metrics.applied(len(batches), mutations, rows, state)
            metrics.lag_messages = micro_batch.lag
            state = self.state = committed = self._duties(state, plan, snapshots, desk)
            metrics.state = state
            if board is not None:
                board.publish(metrics)
            _log_applied(
                (len(batches), mutations, rows),
                time.monotonic() - began,
                state,
                lag,
                micro_batch.lag,
            )
        if parts:
            logger.info(
                "stopping with %d part(s) of batch %d uncommitted: the next start applies the "
                "batch again",
                len(parts),
                parts[-1].batch.batch_id,
            )
        return committed

    def _abandon(self, parts: list[BatchChanges], committed: WorkerState) -> WorkerState:
        """The batch whose parts were applied rolled back: discard them, back to ``committed``."""
        self.configuration.target.abandon()
        self.metrics.discarded()
        logger.warning(
            "batch %d ended without commit after %d part(s) of it were applied uncommitted "
            "(a relay stopped mid-batch and sends it again): they are discarded",
            parts[-1].batch.batch_id,
            len(parts),
        )
        return committed

    def _apply_part(
        self,
        plan: MicroBatchPlan,
        state: WorkerState,
        snapshots: IncrementalSnapshots | None,
        parts: list[BatchChanges],
    ) -> WorkerState:
        """Apply a part of a batch uncommitted; keep what incremental snapshots need of it."""
        state = state.replace(tables=plan.tables, broken=plan.broken)
        if snapshots is not None:
            state = snapshots.with_tasks_of(plan, state)
        started = time.monotonic()
        rows = self.configuration.target.apply(plan, state, commit=False)
        changes = plan.batches[-1]
        flying = set() if snapshots is None else snapshots.tables_in_flight
        parts.append(changes.settled(flying))
        logger.info(
            "applied part %d of batch %d uncommitted: %d mutation(s), %d row(s) in %.3fs",
            len(parts),
            changes.batch.batch_id,
            len(changes.batch.mutations),
            rows,
            time.monotonic() - started,
        )
        return state

    def _check_moved(self, parts: list[BatchChanges]) -> None:
        """Reconnect (a transient error) once the set moved, unless a batch's parts are open."""
        if self.set_watch.moved.is_set() and not parts:
            raise DatabaseUnavailable(
                f"set {self.set_name!r} moved to another database: reconnecting there"
            )

    def _apply_staged(
        self,
        stager: Stager,
        batches: list[CommittedBatch],
        state: WorkerState,
        started: float,
        lag_messages: int,
        snapshots: IncrementalSnapshots | None,
        desk: RequestDesk | None,
        board: StatusBoard | None,
    ) -> WorkerState:
        """A micro-batch through the staged path (``pgshovel.replication.staged``)."""
        state = state.replace(
            position=batches[-1].position, horizon=end_horizon(batches[-1]) or state.horizon
        )
        rows = stager.apply(batches, state)
        self.state = state
        mutations = sum(len(batch.mutations) for batch in batches)
        lag = self.metrics.applied(len(batches), mutations, rows, state)
        self.metrics.lag_messages = lag_messages
        state = self.state = self._duties(state, None, snapshots, desk)
        self.metrics.state = state
        if board is not None:
            board.publish(self.metrics)
        seconds = time.monotonic() - started
        logger.info(
            "applied %d batch(es), %d mutation(s), %d row(s) staged in %.3fs (%.0f mutations/s); "
            "position %s, lag %.3fs, %d message(s)",
            len(batches),
            mutations,
            rows,
            seconds,
            mutations / seconds if seconds > 0 else 0.0,
            state.position.describe(),
            lag,
            lag_messages,
        )
        return state

    @staticmethod
    def _duties(
        state: WorkerState,
        plan: MicroBatchPlan | None,
        snapshots: IncrementalSnapshots | None,
        desk: RequestDesk | None,
    ) -> WorkerState:
        """Between micro-batches: new requests, then incremental snapshot chunks."""
        if desk is not None:
            state = desk.take(state)
        if snapshots is not None:
            state = snapshots.after(plan, state)
        return state

    def _report_broken(self, plan: MicroBatchPlan, state: WorkerState) -> None:
        """A line per schema change; a loud one when a table's capture breaks or is repaired."""
        for step in plan.steps:
            if isinstance(step, SchemaStep) and not step.change.problem:
                logger.info(
                    "%s.%s: %s (%s)",
                    step.change.schema,
                    step.change.table,
                    SchemaChange.Kind.Name(step.change.kind).lower(),
                    step.change.command,
                )
            if isinstance(step, SchemaStep) and step.change.problem:
                logger.error(
                    "table %r.%r is no longer replicated: %s",
                    step.change.schema,
                    step.change.table,
                    step.change.problem,
                )
                self.metrics.recent_errors.record(
                    time.time(),
                    f"table {step.change.schema!r}.{step.change.table!r} is no longer "
                    f"replicated: {step.change.problem}",
                )
        for name in set(state.broken) - set(plan.broken):
            logger.warning("table %r.%r: capture follows the set again", *name)
        if plan.skipped:
            logger.warning(
                "skipped %d mutation(s) of tables whose capture is broken: %s",
                plan.skipped,
                ", ".join(".".join(name) for name in plan.broken),
            )
