"""The Parquet target: an append-only change log and a current-state table per source table.

Layout under ``path``::

    _state.json                                  worker state and current versions
    <schema>/<table>/changes/<offset>.parquet    change log, one file per micro-batch
    <schema>/<table>/current/<version>/*.parquet current rows (version: snapshot, <offset>)

The change log has one row per mutation: the Kafka offset of its batch's
Commit, the batch (node, id), the transaction, the operation, the mutation's
position in the micro-batch, and the row before and after as typed structs.
Commit order: the micro-batch's files are written first under deterministic
names, then ``_state.json`` is atomically replaced; that replace is the commit.
On start, files newer than the stored position and unreferenced versions are
deleted, so a crash in between re-writes the same files and never duplicates.
Readers (``read_changes`` / ``read_current``, or Spark on the listed paths)
must go through ``_state.json``. The current state is rewritten per touched
table and micro-batch (read, merge, write): fine for moderate tables; keyed
tables only. Types: see ``_arrow``.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pgshovel.abc import CopyOut, SnapshotSink
from pgshovel.errors import ConfigurationError, ProgrammingError
from pgshovel.replication import catalog, copytext
from pgshovel.replication.changes import reduce_changes
from pgshovel.replication.mutations import Entry, group_by_table
from pgshovel.replication.targets import _arrow, _files
from pgshovel.settings import NonEmptyText
from pgshovel.source import KeyRange, TableShape
from pgshovel.stream.batches import CommittedBatch, WorkerState
from pgshovel.stream.operations import OPERATION_NAMES

logger = logging.getLogger(__name__)

STATE_FILE = "_state.json"
SNAPSHOT_VERSION = "snapshot"


def table_directory(root: Path, schema: str, name: str) -> Path:
    return root / schema / name


def _offset_name(offset: int) -> str:
    return f"{offset:020d}"


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


def _change_log_schema(table: TableShape) -> pa.Schema:
    row = pa.struct(list(_arrow.table_schema(table)))
    return pa.schema(
        [
            pa.field("offset", pa.int64()),
            pa.field("position", pa.int32()),
            pa.field("node", pa.string()),
            pa.field("batch_id", pa.int64()),
            pa.field("transaction", pa.int64()),
            pa.field("mutation_id", pa.int64()),
            pa.field("operation", pa.string()),
            pa.field("timestamp", pa.timestamp("us", tz="UTC")),
            pa.field("before", row),
            pa.field("after", row),
        ]
    )


class ParquetTarget:
    """Replicates into Parquet files under ``path`` (a local or mounted directory)."""

    def __init__(self, path: NonEmptyText) -> None:
        self.path = path
        self.root = Path(path)
        self._lock: IO[str] | None = None
        self._tables: list[TableShape] = []
        self._versions: dict[str, str] = {}

    def open(self, cluster: str, set_name: str, tables: Sequence[TableShape]) -> WorkerState | None:
        unkeyed = [table.qualified for table in tables if not table.key]
        if unkeyed:
            raise ConfigurationError(
                f"parquet target: tables {unkeyed!r} have no key; the current-state table "
                "needs one (declare key_columns in the set) or use the postgresql target"
            )
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = _files.lock_directory(self.root)
        self._tables = list(tables)
        state_path = self.root / STATE_FILE
        if not state_path.exists():
            return None
        state, self._versions = _files.state_from_document(json.loads(state_path.read_text()))
        self._discard_uncommitted(state)
        return state

    def _discard_uncommitted(self, state: WorkerState) -> None:
        """Delete what a crashed micro-batch wrote before its state was committed."""
        applied = -1 if state.position is None else state.position.offset
        for table in self._tables:
            directory = table_directory(self.root, table.schema, table.name)
            for change_file in sorted((directory / "changes").glob("*.parquet")):
                if int(change_file.stem) > applied:
                    logger.info("removing uncommitted change log file %s", change_file)
                    change_file.unlink()
            current = self._versions.get(table.qualified)
            for version in (directory / "current").glob("*"):
                if version.name != current and state.phase == "streaming":
                    _files.remove(version)

    def begin_snapshot(self, state: WorkerState) -> None:
        for table in self._tables:
            directory = table_directory(self.root, table.schema, table.name)
            _files.remove(directory / "current")
            _files.remove(directory / "changes")
        self._versions = {}
        _files.write_json(_files.state_to_document(state, {}), self.root / STATE_FILE)

    def snapshot_sink(self) -> SnapshotSink:
        return ParquetSnapshotSink(self.path)

    def finish_snapshot(self, state: WorkerState) -> None:
        self._versions = {table.qualified: SNAPSHOT_VERSION for table in self._tables}
        for table in self._tables:
            directory = table_directory(self.root, table.schema, table.name) / "current"
            if not any(directory.glob(f"{SNAPSHOT_VERSION}/*.parquet")):
                empty = _arrow.to_arrow(table, [])
                _files.write_parquet(empty, directory / SNAPSHOT_VERSION / "part-00000.parquet")
        _files.write_json(_files.state_to_document(state, self._versions), self.root / STATE_FILE)

    def apply(self, batches: Sequence[CommittedBatch], state: WorkerState) -> int:
        if state.position is None:
            raise ProgrammingError("parquet target: apply needs a stream position")
        offset = state.position.offset
        grouped = group_by_table(batches, catalog.by_name(self._tables), _arrow.arrow_value)
        versions = dict(self._versions)
        rows = 0
        for table in self._tables:
            entries = grouped.get(table.identity)
            if not entries:
                continue
            directory = table_directory(self.root, table.schema, table.name)
            self._write_change_log(table, entries, directory, offset)
            changes = [change for _, _, change in entries]
            versions[table.qualified] = self._write_current(table, changes, directory, offset)
            rows += len(changes)
        _files.write_json(_files.state_to_document(state, versions), self.root / STATE_FILE)
        superseded = {
            table: version
            for table, version in self._versions.items()
            if versions.get(table) != version
        }
        self._versions = versions
        for table in self._tables:
            if table.qualified in superseded:
                old = table_directory(self.root, table.schema, table.name) / "current"
                _files.remove(old / superseded[table.qualified])
        return rows

    def close(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def _write_change_log(
        self, table: TableShape, entries: Sequence[Entry], directory: Path, offset: int
    ) -> None:
        schema = _change_log_schema(table)
        columns = [
            pa.array([batch.position.offset for batch, _, _ in entries], pa.int64()),
            pa.array(list(range(len(entries))), pa.int32()),
            pa.array([batch.node.hex() for batch, _, _ in entries], pa.string()),
            pa.array([batch.batch_id for batch, _, _ in entries], pa.int64()),
            pa.array([mutation.transaction for _, mutation, _ in entries], pa.int64()),
            pa.array([mutation.id for _, mutation, _ in entries], pa.int64()),
            pa.array([OPERATION_NAMES[mutation.operation] for _, mutation, _ in entries]),
            pa.array(
                [mutation.timestamp for _, mutation, _ in entries], pa.timestamp("us", tz="UTC")
            ),
            _arrow.to_struct_array(table, [change.old for _, _, change in entries]),
            _arrow.to_struct_array(table, [change.new for _, _, change in entries]),
        ]
        log = pa.Table.from_arrays(columns, schema=schema)
        _files.write_parquet(log, directory / "changes" / f"{_offset_name(offset)}.parquet")

    def _write_current(
        self, table: TableShape, changes: Sequence[Any], directory: Path, offset: int
    ) -> str:
        effect = reduce_changes(changes, table.key_positions)
        schema = _arrow.table_schema(table)
        current = self._versions.get(table.qualified, SNAPSHOT_VERSION)
        if effect.truncate:
            rows = schema.empty_table()
        else:
            rows = pq.read_table(directory / "current" / current, schema=schema)
        if effect.rows:
            touched = _arrow.to_arrow(
                table,
                [
                    tuple(
                        key[table.key.index(column.name)] if column.name in table.key else None
                        for column in table.columns
                    )
                    for key in effect.rows
                ],
            ).select(list(table.key))
            if rows.num_rows:
                keep = pc.invert(_is_in_keys(rows, touched, table.key))
                rows = rows.filter(keep)
            upserts = _arrow.to_arrow(table, effect.upserts)
            rows = pa.concat_tables([rows, upserts])
        version = _offset_name(offset)
        _files.write_parquet(rows, directory / "current" / version / "part-00000.parquet")
        return version


def _is_in_keys(rows: pa.Table, keys: pa.Table, key: Sequence[str]) -> pa.Array:
    """Which rows' keys appear in ``keys`` (composite keys compared as tuples)."""
    if len(key) == 1:
        return pc.is_in(rows.column(key[0]), value_set=keys.column(key[0]))
    wanted = set(zip(*(keys.column(name).to_pylist() for name in key), strict=True))
    present = zip(*(rows.column(name).to_pylist() for name in key), strict=True)
    return pa.array([candidate in wanted for candidate in present], pa.bool_())


def _state(path: str) -> tuple[WorkerState, dict[str, str]]:
    state_path = Path(path) / STATE_FILE
    if not state_path.exists():
        raise ConfigurationError(f"{path} holds no replicated data yet (no {STATE_FILE})")
    return _files.state_from_document(json.loads(state_path.read_text()))


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
    return [str(file) for file in sorted(directory.glob("*.parquet")) if int(file.stem) <= applied]


def read_current(spark: Any, path: str, schema: str, table: str) -> Any:
    """The current rows of ``schema.table`` as a Spark DataFrame."""
    return spark.read.parquet(current_path(path, schema, table))


def read_changes(spark: Any, path: str, schema: str, table: str) -> Any:
    """The change log of ``schema.table`` as a Spark DataFrame (may be empty: None)."""
    files = change_files(path, schema, table)
    return spark.read.parquet(*files) if files else None
