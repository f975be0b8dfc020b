"""Iceberg data files replaced in one snapshot: what a MERGE, a compaction and a snapshot need.

pyiceberg's ``delete`` + ``append`` make two snapshots per micro-batch (the
first one a state no source ever had) and bind an IN list of every touched key
(seconds for thousands of keys, no file pruning past 200 values). Here the
files a micro-batch touches are found by the first key column's range
(manifest statistics, no data read), read, filtered with Arrow, and replaced
— together with the new rows — in one ``overwrite`` snapshot, the way
pyiceberg's own copy-on-write delete rewrites files. It uses pyiceberg's
file-level API (``update_snapshot().overwrite()``, ``ArrowScan``,
``_dataframe_to_data_files``), which is why the ``iceberg`` extra pins a minor
version.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable, Sequence

import pyarrow as pa
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files
from pyiceberg.manifest import DataFile
from pyiceberg.table import FileScanTask, Table, Transaction
from pyiceberg.table.metadata import TableMetadata

__all__ = ["FileChange", "plan", "read", "replace", "write"]


def plan(table: Table, row_filter: BooleanExpression) -> list[FileScanTask]:
    """The current files whose statistics may hold rows matching ``row_filter``."""
    return list(table.scan(row_filter=row_filter).plan_files())


def read(transaction: Transaction, table: Table, tasks: Sequence[FileScanTask]) -> pa.Table:
    """The rows of ``tasks``' files in the table's current schema."""
    return _read(transaction.table_metadata, table, tasks)


def _read(metadata: TableMetadata, table: Table, tasks: Sequence[FileScanTask]) -> pa.Table:
    return ArrowScan(
        table_metadata=metadata,
        io=table.io,
        projected_schema=metadata.schema(),
        row_filter=AlwaysTrue(),
    ).to_table(tasks=list(tasks))


class FileChange:
    """The files one snapshot removes and adds (written under one commit uuid)."""

    def __init__(self, transaction: Transaction, table: Table) -> None:
        self.transaction = transaction
        self.table = table
        # Read once: each read of a transaction's metadata deep-copies it (pydantic), and it
        # grows with every snapshot the table keeps; nothing changes it until ``replace``.
        self.metadata = transaction.table_metadata
        self.commit_uuid = uuid.uuid4()
        self._counter = itertools.count(0)
        self.removed: list[DataFile] = []
        self.added: list[DataFile] = []

    def read(self, tasks: Sequence[FileScanTask]) -> pa.Table:
        """The rows of ``tasks``' files in the table's current schema."""
        return _read(self.metadata, self.table, tasks)

    def write(self, rows: pa.Table | pa.RecordBatchReader) -> None:
        """Write ``rows`` as new data files of this change."""
        self.added += write(self.metadata, self.table, rows, self.commit_uuid, self._counter)

    def remove(self, files: Iterable[DataFile]) -> None:
        self.removed += list(files)

    @property
    def empty(self) -> bool:
        return not self.removed and not self.added


def write(
    metadata: TableMetadata,
    table: Table,
    rows: pa.Table | pa.RecordBatchReader,
    commit_uuid: uuid.UUID,
    counter: itertools.count[int],
) -> list[DataFile]:
    if isinstance(rows, pa.Table) and rows.num_rows == 0:
        return []
    return list(
        _dataframe_to_data_files(
            table_metadata=metadata,
            df=rows,
            io=table.io,
            write_uuid=commit_uuid,
            counter=counter,
        )
    )


def replace(change: FileChange, summary: dict[str, str], *, always: bool = False) -> None:
    """Commit ``change`` as one overwrite snapshot (inside its transaction) with ``summary``.

    A change of nothing makes no snapshot (unless ``always``: a history's counter is its
    current snapshot's), except on a table that has none yet: its first snapshot records the
    horizon from which on the table is (empty and) exact, which time travel by source
    transaction needs."""
    if change.empty and change.table.current_snapshot() is not None and not always:
        return
    snapshot = change.transaction.update_snapshot(snapshot_properties=summary).overwrite(
        commit_uuid=change.commit_uuid
    )
    with snapshot as overwrite:
        for removed in change.removed:
            overwrite.delete_data_file(removed)
        for added in change.added:
            overwrite.append_data_file(added)
