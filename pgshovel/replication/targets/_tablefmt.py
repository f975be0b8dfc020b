"""What the Delta Lake and Iceberg targets share: the worker's contracts over the tables library.

A micro-batch (with the parts of a batch too large to hold whole) is folded
into one net effect per touched table (``_tablefmt_effects``), then committed
through the library's intent log (``tables.commit_micro_batch``): the intent,
with the net effects and the worker state after it written ahead in the same
durable file (``_tablefmt_log``), then one commit per table carrying the
micro-batch's counter and the stream position (Delta application transaction
and commit metadata, Iceberg snapshot summary), then the worker state. On
start, ``tables.recover`` compares the latest intent with the counter each
table's own log holds: a table a crash left behind gets the written-ahead net
effect of that same micro-batch, a table that holds it
is skipped, so nothing is applied twice or lost. The initial snapshot is
written by the loader's Spark tasks as Parquet files (``SnapshotWriter``) and
committed once per table. A table dropped in the source loses its copy after
the intent and before the table commits; a renamed one is moved (Delta) or
renamed in the catalog (Iceberg) just before its commit, both done again on a
restart unless done. Incremental snapshot chunks (backfill of an added
table, re-snapshot, repair) merge a range as one more micro-batch of one
table; ``set verify`` compares a range's rows, read by their first key's
bounds, with the source's checksums as the Parquet target does; a
re-snapshot with ``--where`` is refused with the remedy.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import IO, Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq

from pgshovel.abc import ChangedKeys, ChunkSink, Comparison, SnapshotSink
from pgshovel.errors import ProgrammingError, RecoveryNeeded
from pgshovel.protocol import stream_pb2
from pgshovel.replication.staging import tablefmt as _staging
from pgshovel.replication.tables import _intents
from pgshovel.replication.tables._delta import CommitResult
from pgshovel.replication.tables._effect import NetEffect, effect_schema
from pgshovel.replication.tables._evolution import plan as plan_evolution
from pgshovel.replication.tables._maintenance import Maintenance, MaintenancePolicy
from pgshovel.replication.tables._snapshot import WrittenFile
from pgshovel.replication.targets import _arrow, _files, _parquet_chunks
from pgshovel.replication.targets._tablefmt_chunks import (
    RANGE_TYPES,
    TableChunkSink,
    TableSnapshotSink,
    chunk_effect,
)
from pgshovel.replication.targets._tablefmt_effects import (
    RELOAD,
    EffectBuilder,
    refuse_unkeyed,
)
from pgshovel.replication.targets._tablefmt_log import (
    Pending,
    PendingTable,
    TargetFiles,
    pending_document,
)
from pgshovel.replication.targets._tablefmt_upkeep import maintain_committed
from pgshovel.source import Chunk, Column, TableShape
from pgshovel.stream.plan import MicroBatchPlan, Segment
from pgshovel.stream.state import WorkerState

__all__ = ["TableFormatTarget"]

logger = logging.getLogger(__name__)

Identity = tuple[str, str]


class _Committer:
    """The ``TableFormat`` the library's ``commit_micro_batch`` commits through: each table's
    written-ahead part, with its shape change."""

    def __init__(self, target: TableFormatTarget, pending: Pending) -> None:
        self.target = target
        self.pending = pending

    def counter(self, shape: TableShape) -> int | None:
        return self.target.counter(shape)

    def commit(self, effect: NetEffect, record: Any) -> CommitResult:
        table = self.pending.tables[effect.shape.identity]
        tables = self.target.tables
        before = table.before
        if before is not None and before.identity != table.shape.identity:
            # Renamed in the source; done already if only the new name exists (a restart).
            if tables.exists(before) and not tables.exists(table.shape):
                self.target._rename_table(before, table.shape)
        evolution = None
        if table.before is not None and table.before != table.shape:
            evolution = plan_evolution(table.before, table.shape, table.defaults)
            if not evolution.changed:
                evolution = None
            else:
                for line in evolution.describe():
                    logger.info("%s", line)
        if not self.target.tables.exists(table.shape):
            self.target.tables.create(table.shape)
        result: CommitResult = self.target.tables.commit(effect, record, evolution, table.defaults)
        self.target._commit_history(effect, record, before, evolution)
        return result


def _net_effect(table: PendingTable) -> NetEffect:
    return NetEffect(
        table.shape,
        table.rows.cast(effect_schema(table.shape)),
        table.truncate,
        table.truncate_txid,
        table.truncate_time,
    )


class TableFormatTarget:
    """The shared part of ``DeltaTarget`` and ``IcebergTarget`` (see the module docstring)."""

    kind: ClassVar[str] = ""
    #: where a table's snapshot files go, below its table path
    snapshot_suffix: ClassVar[str] = ""

    def __init__(self, root: Path, maintenance: MaintenancePolicy | None = None) -> None:
        self.root = root
        #: compaction and vacuum of the tables a micro-batch touched, right after its commit
        #: (the committing thread: never concurrent with a MERGE); None: never
        self.maintenance = None if maintenance is None else Maintenance(maintenance)
        self.tables: Any = None
        self._files: TargetFiles | None = None
        self._log: _intents.IntentLog | None = None
        self._lock: IO[str] | None = None
        self._counter = 0
        self._state: WorkerState | None = None
        self._builder: EffectBuilder | None = None
        #: the stored state was a load that stopped (a new load replaces that one's history)
        self._resumed_load = False

    # -- what each format provides ----------------------------------------------------

    def _make_tables(self, app_id: str) -> Any:
        raise NotImplementedError

    def _maintain(self, maintenance: Maintenance, shape: TableShape) -> Any:
        raise NotImplementedError

    def _reset_table(self, shape: TableShape) -> None:
        """Drop the table's copy if it exists and create it empty."""
        raise NotImplementedError

    def _commit_snapshot(
        self, shape: TableShape, files: Sequence[WrittenFile], record: Any
    ) -> None:
        raise NotImplementedError

    def _rename_table(self, before: TableShape, after: TableShape) -> None:
        raise NotImplementedError

    def _drop_table(self, shape: TableShape) -> None:
        raise NotImplementedError

    def _drop_tables(self, dropped: Sequence[TableShape], counter: int) -> None:
        """Drop the copies of tables dropped in micro-batch ``counter``, unless a table of that
        name holds the micro-batch already (dropped and created again: a restart)."""
        for shape in dropped:
            if self.tables.exists(shape) and (self.counter(shape) or 0) < counter:
                self._drop_table(shape)

    def _commit_history(
        self, effect: NetEffect, record: Any, before: TableShape | None, evolution: Any
    ) -> None:
        """Commit the table's history right after the table (``history``; none by default)."""

    def _load_history(self, shape: TableShape, record: Any) -> None:
        """Open the loaded rows' versions in the table's history (none by default)."""

    def counter(self, shape: TableShape) -> int | None:
        """The micro-batch the table holds last (and its history, if it keeps one)."""
        counter: int | None = self.tables.counter(shape)
        return counter

    # -- opening and recovery ---------------------------------------------------------

    @property
    def files(self) -> TargetFiles:
        if self._files is None:
            raise ProgrammingError(f"{self.kind} target used before open")
        return self._files

    @property
    def log(self) -> _intents.IntentLog:
        if self._log is None:
            raise ProgrammingError(f"{self.kind} target used before open")
        return self._log

    def open(self, cluster: str, set_name: str) -> WorkerState | None:
        self._files = TargetFiles(self.root, cluster, set_name)
        self.files.directory.mkdir(parents=True, exist_ok=True)
        self._lock = _files.lock_directory(self.files.directory)
        self.tables = self._make_tables(f"pgshovel:{cluster}:{set_name}")
        self._log = _intents.IntentLog(self.files.intents)
        _staging.remove_leftovers(self.kind, self.files.staging)  # a crash's staged files
        stored = self.files.read_state()
        if stored is None:
            self._counter, self._state = 0, None
            return None
        self._counter, self._state = stored
        self._resumed_load = self._state.phase == "snapshot"
        if self._state.phase == "streaming":
            self._state = self._recover(self._counter, self._state)
        return self._state

    def _existing(self, shapes: Collection[TableShape]) -> list[TableShape]:
        return [shape for shape in shapes if self.tables.exists(shape)]

    def _recover(self, counter: int, state: WorkerState) -> WorkerState:
        latest = self.log.latest()
        if latest is None or latest.counter <= counter:
            _intents.recover(
                self.tables, self.log, self._existing(state.tables)
            )  # refuses tables ahead
            self.files.drop_pending()
            return state
        pending = self.files.read_pending(latest.counter, self.log)
        if pending is None:
            raise RecoveryNeeded(
                f"{self.kind} target {self.root}: micro-batch {latest.counter} was recorded but "
                f"its written-ahead effects are missing from {self.files.directory}; reload the "
                f"target from a fresh snapshot: {RELOAD}"
            )
        shapes = {shape.identity: shape for shape in pending.state.tables}
        shapes.update({identity: table.shape for identity, table in pending.tables.items()})
        self._drop_tables(pending.dropped, latest.counter)
        committer = _Committer(self, pending)  # counts a table with its history
        recovery = _intents.recover(committer, self.log, self._existing(shapes.values()))
        for identity in recovery.behind:
            committer.commit(_net_effect(pending.tables[identity]), latest.record)
        if recovery.position != json.dumps(pending.state.position.to_document(), sort_keys=True):
            raise ProgrammingError(
                f"{self.kind} target: micro-batch {latest.counter} ends at {recovery.position} but "
                "its written-ahead state names another position"
            )
        self.files.write_state(latest.counter, pending.state)
        self.files.drop_pending()
        self._counter = latest.counter
        logger.info(
            "%s target: micro-batch %d completed after a restart (%d tables re-committed)",
            self.kind,
            latest.counter,
            len(recovery.behind),
        )
        return pending.state

    # -- micro-batches ----------------------------------------------------------------

    def apply(self, plan: MicroBatchPlan, state: WorkerState, commit: bool = True) -> int:
        if self._builder is None:
            self._builder = EffectBuilder(self.kind)
        try:
            self._builder.add(plan)
        except BaseException:
            self._builder = None  # what the failed micro-batch gathered is never committed
            raise
        rows = sum(
            len(run.entries)
            for step in plan.steps
            if isinstance(step, Segment)
            for run in step.runs
        )
        if not commit:
            return rows
        builder, self._builder = self._builder, None
        tables = {
            identity: PendingTable(
                effect.before,
                effect.shape,
                effect.table(),
                effect.truncate,
                effect.truncate_txid,
                effect.truncate_time,
                effect.defaults,
            )
            for identity, effect in sorted(builder.effects.items())
        }
        batches = sorted({batch for effect in builder.effects.values() for batch in effect.batches})
        self._commit(tables, state, tuple(batches), tuple(builder.dropped))
        return rows

    def _commit(
        self,
        tables: dict[Identity, PendingTable],
        state: WorkerState,
        batches: tuple[int, ...],
        dropped: tuple[TableShape, ...] = (),
    ) -> None:
        if not tables and not dropped:
            self.store_state(state)
            return
        if self._state is None:
            raise ProgrammingError(f"{self.kind} target: a micro-batch before any state")
        counter = self._counter + 1
        # Built first: a value a format cannot hold stops here, before anything is written.
        effects = {identity: _net_effect(table) for identity, table in tables.items()}
        pending = Pending(counter, state, tables, dropped)
        intent = _intents.Intent(
            counter,
            json.dumps(self._state.position.to_document(), sort_keys=True),
            json.dumps(state.position.to_document(), sort_keys=True),
            state.applied_horizon,
            tuple(tables),
            batches,
        )
        # Written ahead with the intent, in one durable file (commit_micro_batch writes the
        # intent too: the same intent is a no-op).
        self.log.write(intent, pending_document(pending))
        self._drop_tables(dropped, counter)
        _intents.commit_micro_batch(_Committer(self, pending), self.log, intent, effects)
        self.files.write_state(counter, state)
        self._counter, self._state = counter, state
        self._upkeep([table.shape for table in tables.values()])

    # -- the staged path (docs/scale-out.md, ``staging.tablefmt``) --------------------

    def stage_sink(self, micro_batch: str) -> tuple[_staging.TableStageSink, str]:
        """Where the staged path's Spark tasks stage ``micro_batch``, and its name."""
        directory = _staging.micro_batch_directory(self.files.staging, micro_batch)
        _files.remove(directory)
        return _staging.TableStageSink(str(directory)), micro_batch

    def commit_stages(
        self, micro_batch: str, stages: Sequence[_staging.FileStage], state: WorkerState
    ) -> int:
        """Commit the stages the driver got back as a driver-applied micro-batch is committed
        (written ahead, intent, a commit per table, ``state``); remove its directory."""
        tables, batches = _staging.pending_tables(state.tables, stages)
        self._commit(tables, state, batches)
        _files.remove(_staging.micro_batch_directory(self.files.staging, micro_batch))
        return sum(table.rows.num_rows for table in tables.values())

    def _upkeep(self, shapes: Sequence[TableShape]) -> None:
        if self.maintenance is not None:
            maintain_committed(self.maintenance, self._maintain, shapes)

    def abandon(self) -> None:
        self._builder = None

    def store_state(self, state: WorkerState) -> None:
        if self._builder is not None:
            raise ProgrammingError(f"{self.kind} target: storing the state while parts are open")
        self.files.write_state(self._counter, state)
        self._state = state

    def can_alter_type(self, old: Column, new: Column) -> bool:
        return _arrow.converts_exactly(old, new)

    # -- the initial snapshot ---------------------------------------------------------

    def begin_snapshot(self, state: WorkerState) -> None:
        refuse_unkeyed(self.kind, state.tables)
        # The state first: a crash from here on restarts the load, never streams on.
        self.files.write_state(0, state)
        self.files.reset()
        self._counter, self._state = 0, state
        for shape in state.tables:
            self._reset_table(shape)

    def snapshot_sink(self) -> SnapshotSink:
        return TableSnapshotSink(
            str(self.root), self.snapshot_suffix, str(self.files.directory / "snapshot")
        )

    def finish_snapshot(self, state: WorkerState) -> None:
        position = json.dumps(state.position.to_document(), sort_keys=True)
        identities = tuple(sorted(shape.identity for shape in state.tables))
        intent = _intents.Intent(1, position, position, state.applied_horizon, identities)
        self.log.write(intent)
        for shape in state.tables:
            manifests = sorted(self.files.manifest_directory(shape).glob("*.json"))
            written = [
                WrittenFile(**entry)
                for manifest in manifests
                for entry in json.loads(manifest.read_text(encoding="utf-8"))
            ]
            self._commit_snapshot(shape, written, intent.record)
            self._load_history(shape, intent.record)
            logger.info(
                "%s target: %s loaded from %d files", self.kind, shape.qualified, len(written)
            )
        self.files.write_state(1, state)
        shutil.rmtree(self.files.directory / "snapshot", ignore_errors=True)
        self._counter, self._state = 1, state

    # -- incremental snapshots --------------------------------------------------------

    def can_filter(self) -> bool:
        return False

    def chunk_sink(self) -> ChunkSink:
        return TableChunkSink(str(self.files.staging), self.kind)

    def merge_chunk(
        self,
        chunk: Chunk,
        changed: ChangedKeys,
        state: WorkerState,
        *,
        replay: Sequence[stream_pb2.Mutation] = (),
    ) -> int:
        shape = chunk.key_range.table
        if chunk.where or replay:
            raise ProgrammingError(
                f"{self.kind} target: chunk of {shape.qualified!r} with a filter or mutations to "
                "replay, which this target refuses before"
            )
        staged = pq.read_table(
            _parquet_chunks.staged_rows_path(self.files.staging, chunk.attempt),
            schema=_arrow.table_schema(shape),
        )
        current = self._read_chunk_range(chunk).select(list(shape.column_names))
        effect = chunk_effect(shape, chunk, current, staged, changed)
        table = PendingTable(shape, shape, effect, False, None, None, {})
        self._commit({shape.identity: table}, state, ())
        self.drop_staging([chunk.attempt])
        return int(staged.num_rows)

    def _read_chunk_range(self, chunk: Chunk) -> pa.Table:
        """The copy's rows whose first key column lies within the chunk's bounds (a superset
        of the chunk's range, which ``_chunk_effect`` tells exactly), or every row when that
        column's type does not order in the copy as in the source (only integers and text)."""
        shape = chunk.key_range.table
        column = shape.column(shape.key[0])
        lower, upper = chunk.key_range.lower, chunk.key_range.upper
        if column is None or column.type_name not in RANGE_TYPES or (lower, upper) == (None, None):
            return self.tables.read(shape)
        low = None if lower is None else _arrow.from_text(column, lower[0])
        high = None if upper is None else _arrow.from_text(column, upper[0])
        return self._read_between(shape, column.name, low, high)

    def _read_between(self, shape: TableShape, name: str, low: Any, high: Any) -> pa.Table:
        """The rows of ``shape``'s copy whose column ``name`` is within [low, high] (None:
        unbounded)."""
        raise NotImplementedError

    def compare_chunk(
        self, chunk: Chunk, changed: ChangedKeys, *, replay: Sequence[stream_pb2.Mutation] = ()
    ) -> Comparison:
        shape = chunk.key_range.table
        if replay:
            raise ProgrammingError(
                f"{self.kind} target: mutations to replay on a chunk of {shape.qualified!r}, but "
                "it holds no unkeyed table"
            )
        current = self._read_chunk_range(chunk).select(list(shape.column_names))
        source = _parquet_chunks.read_sums(self.files.staging, chunk.attempt)
        # The rows' checksums from their PostgreSQL text, as the Parquet target computes them.
        result = _parquet_chunks.compare(
            current.cast(_arrow.table_schema(shape)), chunk, changed, source
        )
        self.drop_staging([chunk.attempt])
        return result

    def drop_staging(self, attempts: Collection[str] | None = None) -> None:
        if self._files is None:
            return
        root = self.files.staging
        if attempts is None:
            _files.remove(root / _parquet_chunks.STAGING)
            return
        for attempt in attempts:
            _files.remove(_parquet_chunks.staged_rows_path(root, attempt))
            _files.remove(_parquet_chunks.staged_sums_path(root, attempt))

    def close(self) -> None:
        self._builder = None
        if self._lock is not None:
            self._lock.close()
            self._lock = None
