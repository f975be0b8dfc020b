"""The Parquet target: an append-only change log and a current-state table per source table.

Layout under ``path``::

    _state.json                                 worker state, current versions, commits
    <schema>/<table>/changes/<version>.parquet  change log, per micro-batch step
    <schema>/<table>/current/<version>/*.parquet  current rows (version: snapshot, v<commit>-<step>)

Versions are named by the commit counter the state file keeps
(``_parquet_state``), never by stream offsets. The change log has one row per
mutation: the stream offset of its batch's Commit, the batch (node, id), the
transaction, the operation, the mutation's position, the shape it has
(``shape_version``, a hash of its columns and types), the row before and after
as typed structs, and who made it (``provenance``, null for tables captured
without provenance; older files lack the column). Commit order: a
micro-batch's files are written first under the next commit's names, then
``_state.json`` is atomically replaced; that replace is the commit. On start,
files of a commit after the stored one and unreferenced versions are deleted,
so a crash in between re-writes the same files and never duplicates. Readers
(``read_changes`` / ``read_current``, or Spark on the listed paths; see
``_parquet_readers``) must go through ``_state.json``.

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
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pgshovel.abc import ChangedKeys, ChunkSink, Comparison, CopyOut, SnapshotSink
from pgshovel.errors import ConfigurationError, ProgrammingError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.mutations import to_change
from pgshovel.replication.targets import _arrow, _files, _parquet_chunks, _parquet_state
from pgshovel.replication.targets import _parquet_tables as tables
from pgshovel.replication.targets._parquet_readers import (
    STATE_FILE,
    applied,
    change_files,
    current_path,
    read_changes,
    read_current,
    read_current_text,
    stored_state,
)
from pgshovel.settings import NonEmptyText
from pgshovel.source import Checksum, Chunk, Column, KeyRange, TableShape, copytext
from pgshovel.stream.plan import MicroBatchPlan, SchemaStep, Segment
from pgshovel.stream.state import WorkerState

__all__ = [
    "STATE_FILE",
    "ParquetTarget",
    "applied",
    "change_files",
    "current_path",
    "read_changes",
    "read_current",
    "read_current_text",
    "stored_state",
]

logger = logging.getLogger(__name__)

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
        #: the committed version of each table's current rows, and the number of the last
        #: commit (the state file's)
        self._versions: dict[str, str] = {}
        self._commits = 0
        #: the next step of the commit being written (the parts of a batch continue it)
        self._step = 0
        #: while parts of a batch are applied: the versions they made current, and every
        #: file they wrote (removed again if the batch is abandoned)
        self._pending: dict[str, str] | None = None
        self._part_versions: list[tuple[str, str, Path]] = []
        self._part_logs: list[Path] = []

    @property
    def copy_name(self) -> str:
        """``parquet:/absolute/path`` of the copy's root."""
        return f"parquet:{self.root.absolute()}"

    def open(self, cluster: str, set_name: str) -> WorkerState | None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = _files.lock_directory(self.root)
        self._step = 0
        stored = _parquet_state.read(self.root)
        if stored is None:
            self._versions, self._commits = {}, 0
            return None
        self._versions, self._commits = dict(stored.versions), stored.commits
        self._discard_uncommitted(stored)
        if stored.legacy_applied is not None:
            self._write(stored.state, self._versions)
            logger.info("upgraded the state file of %s: versions now named by commit", self.root)
        return stored.state

    def _write(
        self, state: WorkerState, versions: dict[str, str], commits: int | None = None
    ) -> None:
        """Replace the state file: the commit of everything written under its names
        (``commits``: the number of the commit this is, if it commits a micro-batch)."""
        number = self._commits if commits is None else commits
        _parquet_state.write(self.root, _parquet_state.Stored(state, dict(versions), number))

    def _discard_uncommitted(self, stored: _parquet_state.Stored) -> None:
        """Delete what a crashed micro-batch wrote before its state was committed."""
        state = stored.state
        for schema_directory in self.root.iterdir():
            if not schema_directory.is_dir():
                continue
            for directory in schema_directory.iterdir():
                qualified = f"{schema_directory.name}.{directory.name}"
                for change_file in sorted((directory / "changes").glob("*.parquet")):
                    if not _parquet_state.committed_change(change_file.stem, stored):
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
        self._write(state, {})

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
        self._write(state, self._versions)

    def apply(self, plan: MicroBatchPlan, state: WorkerState, commit: bool = True) -> int:
        """Write each step's change log and current rows under names of the next commit;
        the state file written last is the commit. Parts of a batch (``commit`` False)
        continue the same commit's steps, so a crash leaves them to
        ``_discard_uncommitted``."""
        commit_number = self._commits + 1
        versions = dict(self._versions if self._pending is None else self._pending)
        recopy = {table.identity for table, _ in plan.recopy}
        rows = 0
        for step in plan.steps:
            name = _parquet_state.version_name(commit_number, self._step)
            self._step += 1
            if isinstance(step, Segment):
                rows += self._apply_segment(step, versions, name)
            else:
                self._apply_schema(step, versions, name, recopy)
        if not commit:
            self._pending = versions
            return rows
        self._write(state, versions, commit_number)
        self._commits = commit_number
        self._forget_superseded(versions)
        return rows

    def abandon(self) -> None:
        for _, _, path in self._part_versions:
            _files.remove(path)
        for path in self._part_logs:
            _files.remove(path)
        self._part_versions, self._part_logs = [], []
        self._pending = None
        self._step = 0

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
        self._step = 0
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
        self._write(state, versions)
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
        self._write(state, self._versions)

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
