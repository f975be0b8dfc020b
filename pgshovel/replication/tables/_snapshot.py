"""The initial snapshot of a table: key ranges written as Parquet files by tasks, committed once.

A ``SnapshotWriter`` pickles into Spark tasks. Each task reads one key range
(the loader's COPY text, as for every target), converts it column by column
(``_text``), sorts it by key and writes it as Parquet files of at most
``rows_per_file`` rows straight into the table's directory, each under a name
of its own (a retried task writes new names; the driver only commits what the
successful attempts returned). Key ranges do not overlap, so the files are
key-ordered and the stream's MERGE prunes them by key range from the start.
The driver then commits all files of the table at once, replacing whatever
the table held: Delta through ``create_write_transaction`` with one add action
per file (statistics included, which pruning needs), Iceberg through one
overwrite snapshot of the files (pyiceberg reads their statistics from the
footers; the files carry no field ids, so the table gets a name mapping). The
commit carries the snapshot's ``CommitRecord`` (its horizon is the exported
snapshot's). Files of a snapshot that never committed are referenced by
nothing: vacuum and the orphan cleanup remove them.
"""

from __future__ import annotations

import io
import json
import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import CommitProperties, Transaction
from deltalake.transaction import AddAction, RemoveAction
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.table import TableProperties, _parquet_files_to_data_files

from pgshovel.abc import CopyOut
from pgshovel.replication.tables import _iceberg_files
from pgshovel.replication.tables._delta import DeltaTables
from pgshovel.replication.tables._effect import CHANGE_FIELDS, CommitRecord, check_range
from pgshovel.replication.tables._effect import stored_schema as _stored_schema
from pgshovel.replication.tables._iceberg import IcebergTables
from pgshovel.replication.tables._text import copy_text_to_arrow
from pgshovel.source import KeyRange, TableShape

__all__ = ["SnapshotWriter", "WrittenFile", "commit_delta_snapshot", "commit_iceberg_snapshot"]


@dataclass(frozen=True)
class WrittenFile:
    """One Parquet file a task wrote: its path, size, rows and Delta statistics (JSON)."""

    path: str
    size: int
    rows: int
    stats: str


def _json_value(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def delta_stats(rows: pa.Table) -> str:
    """Delta's per-file statistics: row count, nulls, and min/max of integer, text and date
    columns (what a MERGE's key bounds prune by)."""
    minimum: dict[str, Any] = {}
    maximum: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for field in rows.schema:
        column = rows.column(field.name)
        if pa.types.is_struct(field.type):
            continue
        nulls[field.name] = column.null_count
        kind = field.type
        if rows.num_rows and (
            pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_date32(kind)
        ):
            extremes = pc.min_max(column)
            if extremes["min"].is_valid:
                minimum[field.name] = _json_value(extremes["min"].as_py())
                maximum[field.name] = _json_value(extremes["max"].as_py())
    return json.dumps(
        {
            "numRecords": rows.num_rows,
            "minValues": minimum,
            "maxValues": maximum,
            "nullCount": nulls,
        }
    )


@dataclass(frozen=True)
class SnapshotWriter:
    """Writes one table's key ranges as Parquet files into ``directory`` (pickles into tasks)."""

    shape: TableShape
    directory: str
    rows_per_file: int = 1_000_000

    def rows(self, data: bytes) -> pa.Table:
        """A range's COPY text as the stored rows (change columns null), sorted by key."""
        values = copy_text_to_arrow(self.shape, data)
        check_range(self.shape, values)
        for field in CHANGE_FIELDS:
            values = values.append_column(field, pa.nulls(values.num_rows, field.type))
        return values.sort_by([(name, "ascending") for name in self.shape.key])

    def load_range(self, key_range: KeyRange, copy_out: CopyOut) -> list[WrittenFile]:
        """Read ``key_range`` through ``copy_out`` and write it; the files written."""
        buffer = io.BytesIO()
        copy_out(buffer)
        rows = self.rows(buffer.getvalue())
        directory = Path(self.directory)
        directory.mkdir(parents=True, exist_ok=True)
        written = []
        for start in range(0, max(rows.num_rows, 1), self.rows_per_file):
            part = rows.slice(start, self.rows_per_file)
            if part.num_rows == 0:
                break
            name = f"part-snapshot-{key_range.index:05d}-{start:012d}-{uuid.uuid4()}.parquet"
            temporary = directory / f".{name}.tmp"
            pq.write_table(part, temporary)
            with temporary.open("rb") as file:
                os.fsync(file.fileno())
            os.replace(temporary, directory / name)
            written.append(
                WrittenFile(
                    str(directory / name),
                    (directory / name).stat().st_size,
                    part.num_rows,
                    delta_stats(part),
                )
            )
        return written


def commit_delta_snapshot(
    tables: DeltaTables, shape: TableShape, files: Sequence[WrittenFile], record: CommitRecord
) -> int:
    """Make ``files`` the whole content of the table in one commit; the version made."""
    table = tables.create(shape)
    root = Path(tables.path(shape))
    now = int(time.time() * 1000)
    actions: list[AddAction | RemoveAction] = [
        AddAction(str(Path(file.path).relative_to(root)), file.size, {}, now, True, file.stats)
        for file in files
    ]
    table.create_write_transaction(
        actions,
        mode="overwrite",
        schema=_stored_schema(shape),
        commit_properties=CommitProperties(
            app_transactions=[Transaction(tables.app_id, record.counter)],
            custom_metadata=record.to_properties(),
        ),
    )
    table.update_incremental()
    return table.version()


def commit_iceberg_snapshot(
    tables: IcebergTables, shape: TableShape, files: Sequence[WrittenFile], record: CommitRecord
) -> int | None:
    """Make ``files`` the whole content of the table in one snapshot; its id."""
    table = tables.create(shape)
    summary = record.to_properties()
    with table.transaction() as transaction:
        if transaction.table_metadata.name_mapping() is None:
            mapping = transaction.table_metadata.schema().name_mapping.model_dump_json()
            transaction.set_properties({TableProperties.DEFAULT_NAME_MAPPING: mapping})
        change = _iceberg_files.FileChange(transaction, table)
        change.remove(task.file for task in _iceberg_files.plan(table, AlwaysTrue()))
        change.added += list(
            _parquet_files_to_data_files(
                table_metadata=transaction.table_metadata,
                file_paths=[file.path for file in files],
                io=table.io,
            )
        )
        _iceberg_files.replace(change, summary)
        transaction.set_properties(summary)
    snapshot = tables.table(shape).current_snapshot()
    return None if snapshot is None else snapshot.snapshot_id


def snapshot_directory(tables: DeltaTables | IcebergTables, shape: TableShape) -> str:
    """Where the snapshot's tasks write: the Delta table's directory, the Iceberg ``data/``."""
    if isinstance(tables, DeltaTables):
        return tables.path(shape)
    return f"{tables.location(shape)}/data"
