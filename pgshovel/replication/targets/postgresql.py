"""The PostgreSQL target: replicated tables plus the worker's state in one database.

Commit order: each micro-batch's changes and the new stream position are
written in one target transaction, so after a crash the stored position names
exactly the last batch applied. A snapshot load is all or nothing: ranges are
committed by parallel Spark tasks, each with a record of its range (a range
Spark runs again after losing an executor is loaded once, see ``_pgranges``),
so if the worker dies during the load the state stays in phase ``snapshot`` and
the next start empties the set's tables and loads again from a new snapshot.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import connection as Connection
from psycopg2.extensions import cursor as Cursor

from pgshovel.abc import ChangedKeys, ChunkSink, Comparison, CopyOut, SnapshotSink
from pgshovel.cluster.dsn import mask_dsn
from pgshovel.errors import DatabaseError, PgshovelError, ProgrammingError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.incremental import attempt_prefix
from pgshovel.replication.mutations import to_change
from pgshovel.replication.staging import postgres as _pgstage
from pgshovel.replication.targets import (
    _pgapply,
    _pgaudit,
    _pgchunks,
    _pgranges,
    _pgschema,
    _pgstate,
    _pgwake,
)
from pgshovel.settings import NonEmptyText
from pgshovel.source import (
    Checksum,
    Chunk,
    Column,
    KeyRange,
    TableShape,
    cast_is_exact,
    connect,
    translating,
)
from pgshovel.stream import codec
from pgshovel.stream.plan import MicroBatchPlan, SchemaStep, Segment
from pgshovel.stream.state import WorkerState

logger = logging.getLogger(__name__)

STAGING_TABLE = "pgshovel_staging"


@dataclass(frozen=True)
class PostgresSnapshotSink:
    """Pipes a range's ``COPY TO`` output from the source into ``COPY FROM`` on the target.

    A range is committed with its row in ``pgshovel_replication.snapshot_ranges``
    (``_pgranges``): an attempt Spark runs again after the first one committed
    (its executor was lost before it reported) returns the recorded count and
    copies nothing, so a retried range never duplicates rows.
    """

    dsn: str

    def load_range(self, key_range: KeyRange, copy_out: CopyOut) -> int:
        table = key_range.table
        connection = connect(self.dsn, "pgshovel-replicate snapshot")
        try:
            with translating(f"claiming range {key_range.index} of {table.qualified!r}"):
                with connection.cursor() as cursor:
                    loaded = _pgranges.claim(cursor, key_range)
                if loaded is not None:
                    connection.rollback()
                    logger.info(
                        "range %d of %s was loaded by an earlier attempt (%d rows): not copied",
                        key_range.index,
                        table.qualified,
                        loaded,
                    )
                    return loaded
            rows = _pipe_range(connection, table, copy_out, commit=False)
            with translating(f"committing range {key_range.index} of {table.qualified!r}"):
                with connection.cursor() as cursor:
                    _pgranges.record(cursor, key_range, rows)
                connection.commit()
            return rows
        finally:
            connection.close()


@dataclass(frozen=True)
class PostgresChunkSink:
    """Stages incremental snapshot chunks in unlogged tables of the target."""

    dsn: str

    def stage_rows(
        self, attempt: str, table: TableShape, copy_out: CopyOut, *, selected: bool = False
    ) -> int:
        connection = connect(self.dsn, "pgshovel-replicate chunk")
        try:
            with translating(f"staging a chunk of {table.qualified!r}"):
                with connection.cursor() as cursor:
                    _pgchunks.create_staging(cursor, attempt, table, selected)
                rows = _pipe_range(
                    connection,
                    table,
                    copy_out,
                    _pgchunks.copy_into_staging(attempt, table, selected),
                )
                if selected:
                    with connection.cursor() as cursor:
                        rows = _pgchunks.selected_rows(cursor, attempt)
                return rows
        finally:
            connection.close()

    def stage_checksums(self, attempt: str, checksums: list[Checksum]) -> None:
        connection = connect(self.dsn, "pgshovel-replicate chunk")
        try:
            with translating("staging checksums"), connection.cursor() as cursor:
                _pgchunks.stage_checksums(cursor, attempt, checksums)
                connection.commit()
        finally:
            connection.close()


def _pipe_range(
    connection: Connection,
    table: TableShape,
    copy_out: CopyOut,
    copy_in: sql.Composable | None = None,
    commit: bool = True,
) -> int:
    read_fd, write_fd = os.pipe()
    failure: list[BaseException] = []

    def produce() -> None:
        with os.fdopen(write_fd, "wb") as writer:
            try:
                copy_out(writer)
            except BaseException as error:
                failure.append(error)

    producer = threading.Thread(target=produce, name=f"copy-out {table.qualified}")
    producer.start()
    copy_in = copy_in or sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(table.schema, table.name),
        sql.SQL(", ").join(sql.Identifier(name) for name in table.column_names),
    )
    try:
        with os.fdopen(read_fd, "rb") as reader, connection.cursor() as cursor:
            cursor.copy_expert(copy_in.as_string(cursor), reader, size=1 << 16)
            rows = cursor.rowcount
    finally:
        producer.join()
    if failure:
        connection.rollback()
        if isinstance(failure[0], PgshovelError):
            raise failure[0]
        raise DatabaseError(
            f"reading a snapshot range of {table.qualified!r} from the source failed: {failure[0]}"
        ) from failure[0]
    if commit:
        connection.commit()
    return rows


class PostgresTarget:
    """Replicates into the PostgreSQL database at ``dsn`` (tables created when missing);
    with ``audit`` every applied mutation also gets a row in ``pgshovel_replication.audit``
    (``_pgaudit``)."""

    def __init__(self, dsn: NonEmptyText, audit: bool = False) -> None:
        self.dsn = dsn
        self.audit = audit
        self._connection: Connection | None = None
        self._cluster = ""
        self._set_name = ""
        #: parts of a batch applied in the open transaction, not committed yet
        self._uncommitted = False
        #: wakes wait_applied callers after each commit (README "Read-your-writes")
        self._baton: _pgwake.Baton | None = None

    def __repr__(self) -> str:
        return f"PostgresTarget(dsn={mask_dsn(self.dsn)!r}, audit={self.audit!r})"

    @property
    def copy_name(self) -> str:
        """``postgresql:host:port/dbname`` (what the DSN names of them; never a password)."""
        try:
            parameters = psycopg2.extensions.parse_dsn(self.dsn)
        except psycopg2.ProgrammingError:
            return "postgresql:<unparseable dsn>"
        host = parameters.get("host") or parameters.get("hostaddr") or ""
        port = parameters.get("port", "")
        where = f"{host}:{port}" if port else host
        return f"postgresql:{where}/{parameters.get('dbname', '')}"

    @property
    def connection(self) -> Connection:
        if self._connection is None:
            raise ProgrammingError("postgresql target is not open; call open() first")
        return self._connection

    def open(self, cluster: str, set_name: str) -> WorkerState | None:
        self._cluster, self._set_name = cluster, set_name
        self._connection = connect(self.dsn, "pgshovel-replicate target")
        # The wake-up lock is taken when this transaction commits (and after every commit).
        self._baton = _pgwake.Baton(cluster, set_name)
        with self._transaction("preparing the postgresql target") as cursor:
            _pgstate.lock(cursor, cluster, set_name)
            _pgstate.create(cursor)
            # A crash's staging tables (the staged path's): never part of the copy.
            _pgstage.drop_stages(
                cursor,
                _pgstage.leftover_stages(cursor, _pgstage.stage_prefix(cluster, set_name)),
            )
            if self.audit:
                _pgaudit.create(cursor)
            state = _pgstate.read(cursor, cluster, set_name)
        return state

    def begin_snapshot(self, state: WorkerState) -> None:
        with self._transaction("starting a snapshot load") as cursor:
            for table in state.tables:
                _pgschema.drop_table(cursor, table)
                _pgapply.create_table(cursor, table)
            _pgranges.create(cursor)
            _pgranges.forget(cursor, state.tables)
            _pgstate.write(cursor, self._cluster, self._set_name, state)

    def snapshot_sink(self) -> SnapshotSink:
        return PostgresSnapshotSink(self.dsn)

    def finish_snapshot(self, state: WorkerState) -> None:
        with self._transaction("finishing a snapshot load") as cursor:
            for table in state.tables:
                cursor.execute(
                    sql.SQL("ANALYZE {}").format(sql.Identifier(table.schema, table.name))
                )
            _pgranges.forget(cursor, state.tables)
            _pgstate.write(cursor, self._cluster, self._set_name, state)

    def apply(self, plan: MicroBatchPlan, state: WorkerState, commit: bool = True) -> int:
        first = plan.batches[0].batch.offset if plan.batches else None
        doing = f"applying {len(plan.batches)!r} batch(es) from offset {first!r} to the target"
        recopy = {table.identity for table, _ in plan.recopy}
        rows = 0
        with self._transaction(doing + " (rolled back)", applying=True, commit=commit) as cursor:
            for step in plan.steps:
                if isinstance(step, Segment):
                    rows += self._apply_segment(cursor, step)
                else:
                    self._apply_schema(cursor, step, recopy)
            if self.audit:
                _pgaudit.write(cursor, self._cluster, self._set_name, plan)
            if commit:
                _pgstate.write(cursor, self._cluster, self._set_name, state)
        return rows

    def abandon(self) -> None:
        self._roll_back()

    def stage_sink(self, micro_batch: str) -> tuple[_pgstage.PostgresStageSink, str]:
        """Where the staged path's Spark tasks stage ``micro_batch``, and its name prefix."""
        prefix = _pgstage.stage_prefix(self._cluster, self._set_name, micro_batch)
        return _pgstage.PostgresStageSink(self.dsn, prefix), prefix

    def commit_stages(
        self, prefix: str, stages: Sequence[_pgstage.Stage], state: WorkerState
    ) -> int:
        """Apply a staged micro-batch and store ``state`` in one transaction; drop its staging
        tables (a failed attempt's too). Returns the rows written or removed."""
        rows = 0
        with self._transaction("committing a staged micro-batch (rolled back)") as cursor:
            for table in state.tables:
                mine = [stage for stage in stages if (stage.schema, stage.table) == table.identity]
                if mine:
                    rows += _pgstage.commit_table(cursor, table, mine)
            _pgstate.write(cursor, self._cluster, self._set_name, state)
            _pgstage.drop_stages(cursor, _pgstage.leftover_stages(cursor, prefix))
        return rows

    def _apply_segment(self, cursor: Cursor, segment: Segment) -> int:
        rows = 0
        for run in segment.runs:
            mutations = [mutation for _, mutation in run.entries]
            if run.table.key:
                rows += _pgapply.apply_keyed(cursor, run.table, mutations, STAGING_TABLE)
            else:
                changes = [to_change(mutation, run.table) for mutation in mutations]
                rows += _pgapply.apply_unkeyed(cursor, run.table, changes)
        return rows

    def _apply_schema(self, cursor: Cursor, step: SchemaStep, recopy: set[tuple[str, str]]) -> None:
        change, before, after = step.change, step.before, step.after
        if after is None:
            if before is not None and change.kind == stream_pb2.SchemaChange.DROP:
                _pgschema.drop_table(cursor, before)
            # REMOVE (left the set) and a broken capture keep the table as it is.
            return
        if before is None:
            # New to the copy: whatever an earlier life of the table left is replaced.
            _pgschema.drop_table(cursor, after)
            _pgapply.create_table(cursor, after)
            return
        current = _pgschema.rename_table(cursor, before, after)
        defaults = {column.name: codec.to_text(column.value) for column in change.added_defaults}
        _pgschema.alter_columns(cursor, current, after, defaults, after.identity in recopy)

    def can_alter_type(self, old: Column, new: Column) -> bool:
        return cast_is_exact(old, new)

    def can_filter(self) -> bool:
        return True

    def chunk_sink(self) -> ChunkSink:
        return PostgresChunkSink(self.dsn)

    def merge_chunk(
        self,
        chunk: Chunk,
        changed: ChangedKeys,
        state: WorkerState,
        *,
        replay: Sequence[stream_pb2.Mutation] = (),
    ) -> int:
        table = chunk.key_range.table
        with self._transaction(f"merging a chunk of {table.qualified!r}") as cursor:
            rows = _pgchunks.merge(cursor, chunk, changed, replay)
            _pgchunks.drop(cursor, [chunk.attempt])
            _pgstate.write(cursor, self._cluster, self._set_name, state)
        return rows

    def compare_chunk(
        self, chunk: Chunk, changed: ChangedKeys, *, replay: Sequence[stream_pb2.Mutation] = ()
    ) -> Comparison:
        table = chunk.key_range.table
        with self._transaction(f"comparing a chunk of {table.qualified!r}") as cursor:
            result = _pgchunks.compare(cursor, chunk, changed, replay)
            _pgchunks.drop(cursor, [chunk.attempt])
        return result

    def store_state(self, state: WorkerState) -> None:
        with self._transaction("storing the worker state") as cursor:
            _pgstate.write(cursor, self._cluster, self._set_name, state)

    def drop_staging(self, attempts: Collection[str] | None = None) -> None:
        prefix = attempt_prefix(self._cluster, self._set_name)
        with self._transaction("removing staged chunks") as cursor:
            _pgchunks.drop(
                cursor, _pgchunks.leftovers(cursor, prefix) if attempts is None else attempts
            )

    @contextmanager
    def _transaction(
        self, doing: str, applying: bool = False, commit: bool = True
    ) -> Iterator[Cursor]:
        """A cursor in one target transaction, committed when the block ends (unless
        ``commit`` is False: parts of a batch) and rolled back on any error (``doing``
        names the step in the error). Only ``apply`` continues uncommitted parts."""
        if self._uncommitted and not applying:
            raise ProgrammingError(
                f"postgresql target: {doing} while parts of a batch are uncommitted"
            )
        try:
            with translating(doing), self.connection.cursor() as cursor:
                yield cursor
                if commit:
                    self.connection.commit()
                self._uncommitted = not commit
                if commit and self._baton is not None:
                    self._baton.hand_over(self.connection)
        except BaseException:
            self._roll_back()
            raise

    def _roll_back(self) -> None:
        self._uncommitted = False
        connection = self._connection
        if connection is not None and not connection.closed:
            try:
                connection.rollback()
            except psycopg2.Error:
                connection.close()

    def close(self) -> None:
        self._uncommitted = False
        self._baton = None
        if self._connection is not None:
            _pgstate.release(self._connection)
            self._connection.close()
            self._connection = None
