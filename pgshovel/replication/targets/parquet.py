"""The Parquet target: an append-only change log and a current-state table per source table.

Layout under ``path``::

    _state.json                                   worker state and current versions
    <schema>/<table>/changes/<offset>-<step>.parquet   change log, per micro-batch step
    <schema>/<table>/current/<version>/*.parquet  current rows (version: snapshot, <offset>-<step>)

The change log has one row per mutation: the Kafka offset of its batch's
Commit, the batch (node, id), the transaction, the operation, the mutation's
position, the shape it has (``shape_version``, a hash of its columns and types),
the row before and after as typed structs, and who made it (``provenance``, null
for tables captured without provenance; older files lack the column). Commit order: a micro-batch's
files are written first under deterministic names, then ``_state.json`` is
atomically replaced; that replace is the commit. On start, files newer than the
stored position and unreferenced versions are deleted, so a crash in between
re-writes the same files and never duplicates. Readers (``read_changes`` /
``read_current``, or Spark on the listed paths) must go through
``_state.json``.

Schema changes: the current state is rewritten with the new shape (renamed
columns keep their values, added ones get the value existing rows got, a
renamed table moves to its new directory); the change log's files keep the
shape of their time, so Spark reads them with ``mergeSchema`` and
``shape_version`` tells the shapes apart; the change log of a renamed table
continues under its new name. A dropped table's current state is removed, its
change log kept. The current state is rewritten per touched table and
micro-batch (read, merge, write): fine for moderate tables; keyed tables only.
Types: see ``_arrow``.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from pgshovel.abc import ChangedKeys, ChunkSink, Comparison, CopyOut, SnapshotSink
from pgshovel.errors import ConfigurationError, ProgrammingError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.mutations import to_change
from pgshovel.replication.targets import _arrow, _files, _parquet_chunks
from pgshovel.replication.targets import _parquet_tables as tables
from pgshovel.settings import NonEmptyText
from pgshovel.source import Checksum, Chunk, Column, KeyRange, TableShape, copytext
from pgshovel.stream.handoff import is_visible, parse_txid_snapshot
from pgshovel.stream.plan import MicroBatchPlan, SchemaStep, Segment
from pgshovel.stream.state import WorkerState

logger = logging.getLogger(__name__)

STATE_FILE = "_state.json"
SNAPSHOT_VERSION = "snapshot"
table_directory = tables.table_directory


@dataclass(frozen=True)
class ParquetSnapshotSink:
    """Writes each snapshot range to its own deterministic file of the snapshot version."""

    path: str

    def load_range(self, key_range: KeyRange, copy_out: CopyOut) -> int:
        table, index = key_range.table, key_range.index
        buffer = io.BytesIO()
        copy_out(buffer)
        lines = buffer.getvalue().decode("utf-8").splitlines()
        rows = [copytext.decode_line(line) for line in lines]
        directory = table_directory(Path(self.path), table.schema, table.name)
        target = directory / "current" / SNAPSHOT_VERSION / f"part-{index:05d}.parquet"
        _files.write_parquet(_arrow.text_rows_to_arrow(table, rows), target)
        return len(rows)


@dataclass(frozen=True)
class ParquetChunkSink:
    """Stages incremental snapshot chunks as files under ``_staging``."""

    path: str

    def stage_rows(
        self, attempt: str, table: TableShape, copy_out: CopyOut, *, selected: bool = False
    ) -> int:
        if selected:
            raise ConfigurationError(
                "parquet target: a re-snapshot with --where needs the postgresql target"
            )
        buffer = io.BytesIO()
        copy_out(buffer)
        rows = [copytext.decode_line(line) for line in buffer.getvalue().decode().splitlines()]
        target = _parquet_chunks.staged_rows_path(Path(self.path), attempt)
        _files.write_parquet(_arrow.text_rows_to_arrow(table, rows), target)
        return len(rows)

    def stage_checksums(self, attempt: str, checksums: list[Checksum]) -> None:
        _parquet_chunks.write_sums(Path(self.path), attempt, checksums)


def _refuse_unkeyed(shapes: list[TableShape]) -> None:
    unkeyed = [table.qualified for table in shapes if not table.key]
    if unkeyed:
        raise ConfigurationError(
            f"parquet target: tables {unkeyed!r} have no key; the current-state table "
            "needs one (declare key_columns in the set) or use the postgresql target"
        )


class ParquetTarget:
    """Replicates into Parquet files under ``path`` (a local or mounted directory)."""

    def __init__(self, path: NonEmptyText) -> None:
        self.path = path
        self.root = Path(path)
        self._lock: IO[str] | None = None
        #: the committed version of each table's current rows (the state file's)
        self._versions: dict[str, str] = {}
        #: while parts of a batch are applied: the versions they made current, and every
        #: file they wrote (removed again if the batch is abandoned)
        self._pending: dict[str, str] | None = None
        self._part_versions: list[tuple[str, str, Path]] = []
        self._part_logs: list[Path] = []

    def open(self, cluster: str, set_name: str) -> WorkerState | None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = _files.lock_directory(self.root)
        state_path = self.root / STATE_FILE
        if not state_path.exists():
            return None
        state, self._versions = _files.state_from_document(json.loads(state_path.read_text()))
        self._discard_uncommitted(state)
        return state

    def _discard_uncommitted(self, state: WorkerState) -> None:
        """Delete what a crashed micro-batch wrote before its state was committed."""
        applied = -1 if state.position is None else state.position.offset
        for schema_directory in self.root.iterdir():
            if not schema_directory.is_dir():
                continue
            for directory in schema_directory.iterdir():
                qualified = f"{schema_directory.name}.{directory.name}"
                for change_file in sorted((directory / "changes").glob("*.parquet")):
                    if tables.version_offset(change_file.stem) > applied:
                        logger.info("removing uncommitted change log file %s", change_file)
                        change_file.unlink()
                if state.phase != "streaming":
                    continue
                current = self._versions.get(qualified)
                for version in (directory / "current").glob("*"):
                    if version.name != current:
                        _files.remove(version)

    def begin_snapshot(self, state: WorkerState) -> None:
        _refuse_unkeyed(list(state.tables))
        for table in state.tables:
            directory = table_directory(self.root, table.schema, table.name)
            _files.remove(directory / "current")
            _files.remove(directory / "changes")
        self._versions = {}
        _files.write_json(_files.state_to_document(state, {}), self.root / STATE_FILE)

    def snapshot_sink(self) -> SnapshotSink:
        return ParquetSnapshotSink(self.path)

    def finish_snapshot(self, state: WorkerState) -> None:
        self._versions = {table.qualified: SNAPSHOT_VERSION for table in state.tables}
        for table in state.tables:
            directory = table_directory(self.root, table.schema, table.name) / "current"
            if not any(directory.glob(f"{SNAPSHOT_VERSION}/*.parquet")):
                tables.write_rows(
                    self.root, table, SNAPSHOT_VERSION, _arrow.table_schema(table).empty_table()
                )
        _files.write_json(_files.state_to_document(state, self._versions), self.root / STATE_FILE)

    def apply(self, plan: MicroBatchPlan, state: WorkerState, commit: bool = True) -> int:
        """Write each step's change log and current rows under names of the micro-batch's
        last offset; the state file written last is the commit. Parts of a batch (``commit``
        False) are named by their own last offset, which is below the Commit's and above
        the stored position, so a crash leaves them to ``_discard_uncommitted``."""
        if not commit and plan.batches:
            offset = plan.batches[-1].batch.position.offset
        elif commit and state.position is not None:
            offset = state.position.offset
        else:
            raise ProgrammingError("parquet target: apply needs a stream position")
        versions = dict(self._versions if self._pending is None else self._pending)
        recopy = {table.identity for table, _ in plan.recopy}
        rows = 0
        for number, step in enumerate(plan.steps):
            name = tables.version_name(offset, number)
            if isinstance(step, Segment):
                rows += self._apply_segment(step, versions, name)
            else:
                self._apply_schema(step, versions, name, recopy)
        if not commit:
            self._pending = versions
            return rows
        _files.write_json(_files.state_to_document(state, versions), self.root / STATE_FILE)
        self._forget_superseded(versions)
        return rows

    def abandon(self) -> None:
        for _, _, path in self._part_versions:
            _files.remove(path)
        for path in self._part_logs:
            _files.remove(path)
        self._part_versions, self._part_logs = [], []
        self._pending = None

    def _apply_segment(self, segment: Segment, versions: dict[str, str], name: str) -> int:
        rows = 0
        for run in segment.runs:
            table = run.table
            changes = [
                to_change(mutation, table, _arrow.arrow_value) for _, mutation in run.entries
            ]
            tables.write_change_log(self.root, table, run.entries, changes, name)
            current = tables.read_rows(self.root, table, versions[table.qualified])
            tables.write_rows(self.root, table, name, tables.merge(current, table, changes))
            self._wrote(table, name, change_log=True)
            versions[table.qualified] = name
            rows += len(changes)
        return rows

    def _wrote(self, table: TableShape, name: str, change_log: bool) -> None:
        """Remember what an apply wrote, for ``abandon`` and ``_forget_superseded``."""
        directory = table_directory(self.root, table.schema, table.name)
        self._part_versions.append((table.qualified, name, directory / "current" / name))
        if change_log:
            self._part_logs.append(directory / "changes" / f"{name}.parquet")

    def _apply_schema(
        self, step: SchemaStep, versions: dict[str, str], name: str, recopy: set[tuple[str, str]]
    ) -> None:
        before, after = step.before, step.after
        if after is None:
            if before is not None and step.change.kind == stream_pb2.SchemaChange.DROP:
                versions.pop(before.qualified, None)
            return
        _refuse_unkeyed([after])
        if before is None:
            rows = _arrow.table_schema(after).empty_table()
        else:
            defaults = {column.name: column.value for column in step.change.added_defaults}
            current = tables.read_rows(self.root, before, versions[before.qualified])
            rows = tables.evolve(current, before, after, defaults)
            versions.pop(before.qualified, None)
        tables.write_rows(self.root, after, name, rows)
        self._wrote(after, name, change_log=False)
        versions[after.qualified] = name
        if after.identity in recopy:
            logger.info("%s will be copied again from the source", after.qualified)

    def _forget_superseded(self, versions: dict[str, str]) -> None:
        """After the commit: remove versions nothing refers to any more (the previous
        commit's, and those the batch's parts made current before later parts replaced
        them)."""
        for qualified, version in self._versions.items():
            if versions.get(qualified) == version:
                continue
            schema, _, table = qualified.partition(".")
            directory = table_directory(self.root, schema, table) / "current"
            _files.remove(directory / version)
        for qualified, version, path in self._part_versions:
            if versions.get(qualified) != version:
                _files.remove(path)
        self._part_versions, self._part_logs = [], []
        self._pending = None
        self._versions = versions

    def can_alter_type(self, old: Column, new: Column) -> bool:
        return _arrow.converts_exactly(old, new)

    def can_filter(self) -> bool:
        return False  # a --where condition is SQL: Parquet files cannot evaluate it

    def chunk_sink(self) -> ChunkSink:
        return ParquetChunkSink(self.path)

    def _check_committed(self, doing: str) -> None:
        if self._pending is not None:
            raise ProgrammingError(
                f"parquet target: {doing} while parts of a batch are uncommitted"
            )

    def merge_chunk(
        self,
        chunk: Chunk,
        changed: ChangedKeys,
        state: WorkerState,
        *,
        replay: Sequence[stream_pb2.Mutation] = (),
    ) -> int:
        self._check_committed("merging a chunk")
        _no_unkeyed_replay(replay)
        if chunk.where:
            raise ConfigurationError(
                "parquet target: a re-snapshot with --where needs the postgresql target"
            )
        table = chunk.key_range.table
        current = tables.read_rows(self.root, table, self._versions[table.qualified])
        staged = _parquet_chunks.read_staged(self.root, chunk.attempt, table)
        merged = _parquet_chunks.merge(current, staged, chunk, changed)
        name = f"{chunk.attempt}"
        tables.write_rows(self.root, table, name, merged)
        versions = {**self._versions, table.qualified: name}
        _files.write_json(_files.state_to_document(state, versions), self.root / STATE_FILE)
        self._forget_superseded(versions)
        self.drop_staging([chunk.attempt])
        return int(staged.num_rows)

    def compare_chunk(
        self, chunk: Chunk, changed: ChangedKeys, *, replay: Sequence[stream_pb2.Mutation] = ()
    ) -> Comparison:
        _no_unkeyed_replay(replay)
        table = chunk.key_range.table
        current = tables.read_rows(self.root, table, self._versions[table.qualified])
        source = _parquet_chunks.read_sums(self.root, chunk.attempt)
        result = _parquet_chunks.compare(current, chunk, changed, source)
        self.drop_staging([chunk.attempt])
        return result

    def store_state(self, state: WorkerState) -> None:
        self._check_committed("storing the worker state")
        _files.write_json(_files.state_to_document(state, self._versions), self.root / STATE_FILE)

    def drop_staging(self, attempts: Collection[str] | None = None) -> None:
        directory = self.root / _parquet_chunks.STAGING
        if attempts is None:
            _files.remove(directory)
            return
        for attempt in attempts:
            _files.remove(_parquet_chunks.staged_rows_path(self.root, attempt))
            _files.remove(_parquet_chunks.staged_sums_path(self.root, attempt))

    def close(self) -> None:
        self.abandon()
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def _no_unkeyed_replay(replay: Sequence[stream_pb2.Mutation]) -> None:
    if replay:
        raise ProgrammingError(
            "parquet target: mutations to replay on a chunk, but it holds no unkeyed table"
        )


def _state(path: str) -> tuple[WorkerState, dict[str, str]]:
    state_path = Path(path) / STATE_FILE
    if not state_path.exists():
        raise ConfigurationError(f"{path} holds no replicated data yet (no {STATE_FILE})")
    return _files.state_from_document(json.loads(state_path.read_text()))


def applied(path: str, txid: int) -> bool:
    """Read-your-writes: whether source transaction ``txid``'s effect is in the copy at
    ``path`` (it is visible in the horizon of the last batch the state file commits)."""
    state, _ = _state(path)
    if state.phase != "streaming":
        return False
    return is_visible(txid, parse_txid_snapshot(state.applied_horizon))


def current_path(path: str, schema: str, table: str) -> str:
    """The directory holding the committed current rows of ``schema.table``."""
    _, versions = _state(path)
    version = versions.get(f"{schema}.{table}")
    if version is None:
        raise ConfigurationError(f"{path} holds no current state of {schema!r}.{table!r}")
    return str(table_directory(Path(path), schema, table) / "current" / version)


def change_files(path: str, schema: str, table: str) -> list[str]:
    """The committed change log files of ``schema.table``, oldest first."""
    state, _ = _state(path)
    applied = -1 if state.position is None else state.position.offset
    directory = table_directory(Path(path), schema, table) / "changes"
    return [
        str(file)
        for file in sorted(directory.glob("*.parquet"))
        if tables.version_offset(file.stem) <= applied
    ]


def read_current_text(path: str, schema: str, table: str) -> list[tuple[str | None, ...]]:
    """The current rows of ``schema.table``, every value as PostgreSQL's text (pyarrow, no
    Spark): exactly what ``COPY ... TO STDOUT`` prints on the source, for comparisons.

    A running worker removes a version's files once a newer one is committed; a read
    that loses that race reads the newer version instead."""
    while True:
        state, versions = _state(path)
        shape = state.table(schema, table)
        if shape is None:
            raise ConfigurationError(f"{path} does not replicate {schema!r}.{table!r}")
        version = versions.get(f"{schema}.{table}")
        try:
            rows = pq.read_table(
                current_path(path, schema, table), schema=_arrow.table_schema(shape)
            )
        except (OSError, pa.ArrowInvalid):
            if _state(path)[1].get(f"{schema}.{table}") != version:
                continue  # replaced while we read it: read the committed one
            raise
        return [
            tuple(_parquet_chunks.texts(shape, row)) for row in _parquet_chunks.rows_as_python(rows)
        ]


def read_current(spark: Any, path: str, schema: str, table: str) -> Any:
    """The current rows of ``schema.table`` as a Spark DataFrame."""
    return spark.read.parquet(current_path(path, schema, table))


def read_changes(spark: Any, path: str, schema: str, table: str) -> Any:
    """The change log of ``schema.table`` as a Spark DataFrame (None when empty).

    Files written before and after a schema change have different columns:
    they are read with ``mergeSchema``."""
    files = change_files(path, schema, table)
    return spark.read.option("mergeSchema", "true").parquet(*files) if files else None
