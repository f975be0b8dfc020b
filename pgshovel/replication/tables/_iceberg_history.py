"""The SCD type 2 history of an Iceberg copy: ``<schema>.<table>~history`` in the same catalog.

The Iceberg ``HistoryStore``: the history of table ``s.t`` is the catalog's
table ``s`` . ``t~history`` (pyiceberg's SQL catalog takes '~' in a name), its
files under ``<warehouse>/<s>/<t>~history`` (the copy's own directory escapes a
'~' of a source name, so no copy's files are there). Each micro-batch is one
overwrite snapshot whose summary carries the micro-batch's record, made even
when nothing changed, so the current snapshot's counter is the history's: the
data files whose statistics may hold a current version (end transaction null)
of a touched key — by the first key column's range, every such file after a
TRUNCATE — are read and replaced by their rows with those versions closed
(``_versions.close``), and the opened versions are added. A load replaces
every file in one snapshot marked ``pgshovel.load``; taking it back sets the
table to the snapshot before (or empties it when the load made the first).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pyarrow as pa
from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, IsNull
from pyiceberg.table import Table

from pgshovel.replication.tables import _iceberg_files
from pgshovel.replication.tables._delta import CommitResult
from pgshovel.replication.tables._effect import CommitRecord, NetEffect
from pgshovel.replication.tables._iceberg import APP, IcebergTables, key_bounds
from pgshovel.replication.tables._versions import (
    END_TXID,
    LOAD,
    close,
    closings,
    history_schema,
    openings,
    truncation,
)
from pgshovel.source import TableShape

__all__ = ["IcebergHistory"]

logger = logging.getLogger(__name__)


def _summary(table: Table) -> dict[str, str]:
    snapshot = table.current_snapshot()
    if snapshot is None or snapshot.summary is None:
        return {}
    return dict(snapshot.summary.additional_properties)


class IcebergHistory:
    """The history tables of an ``IcebergTables`` (same catalog, same app id)."""

    def __init__(self, tables: IcebergTables) -> None:
        self.tables = tables

    @staticmethod
    def identifier(shape: TableShape) -> tuple[str, str]:
        return (shape.schema, f"{shape.name}~history")

    def where(self, shape: TableShape) -> str:
        return ".".join(self.identifier(shape))

    def removal(self, shape: TableShape) -> str:
        return (
            f"drop the history table {self.identifier(shape)!r} from the catalog (pyiceberg: "
            "catalog.purge_table)"
        )

    def exists(self, shape: TableShape) -> bool:
        return bool(self.tables.catalog.table_exists(self.identifier(shape)))

    def location(self, shape: TableShape) -> str:
        return f"{self.tables.location(shape)}~history"

    def table(self, shape: TableShape) -> Table:
        return self.tables.catalog.load_table(self.identifier(shape))

    def create(self, shape: TableShape) -> None:
        if self.exists(shape):
            return
        self.tables.catalog.create_namespace_if_not_exists((shape.schema,))
        self.tables.catalog.create_table(
            self.identifier(shape),
            schema=history_schema(shape),
            location=self.location(shape),
            properties={APP: self.tables.app_id, "format-version": "2"},
        )
        logger.info("created iceberg history %s", self.where(shape))

    def last_commit(self, shape: TableShape) -> CommitRecord | None:
        """The record of the last micro-batch (or load) the history holds: its current
        snapshot's, which a compaction carries on."""
        return CommitRecord.from_properties(_summary(self.table(shape)))

    def counter(self, shape: TableShape) -> int | None:
        record = self.last_commit(shape)
        return None if record is None else record.counter

    def columns(self, shape: TableShape) -> list[str]:
        return [field.name for field in self.table(shape).schema().fields]

    def add_columns(self, shape: TableShape, fields: Sequence[pa.Field]) -> None:
        with self.table(shape).update_schema() as update:
            update.union_by_name(pa.schema(list(fields)))

    def current(self, shape: TableShape) -> pa.Table:
        return self.table(shape).scan(row_filter=IsNull(term=END_TXID)).to_arrow()

    def versions(self, shape: TableShape) -> pa.Table:
        return self.table(shape).scan().to_arrow()

    def commit(self, effect: NetEffect, record: CommitRecord) -> CommitResult:
        shape = effect.shape
        name = f"{shape.qualified}~history"
        table = self.table(shape)
        held = CommitRecord.from_properties(_summary(table))
        if held is not None and held.counter >= record.counter:
            return CommitResult(name, record.counter, None)
        ending = closings(effect)
        truncate = truncation(effect)
        row_filter: BooleanExpression | None = None
        if truncate is not None:
            row_filter = IsNull(term=END_TXID)
        elif ending.num_rows:
            row_filter = And(key_bounds(shape, ending), IsNull(term=END_TXID))
        read = 0
        with table.transaction() as transaction:
            change = _iceberg_files.FileChange(transaction, table)
            tasks = [] if row_filter is None else _iceberg_files.plan(table, row_filter)
            for task in tasks:
                rows = _iceberg_files.read(transaction, table, [task])
                closed, ended = close(rows, ending, shape.key, truncate)
                if ended:
                    change.remove([task.file])
                    change.write(closed)
            read = len(tasks)
            change.write(openings(effect))
            _iceberg_files.replace(change, record.to_properties(), always=True)
        snapshot = self.table(shape).current_snapshot()
        return CommitResult(
            name,
            record.counter,
            None if snapshot is None else snapshot.snapshot_id,
            files_scanned=read,
        )

    def commit_load(self, shape: TableShape, versions: pa.Table, record: CommitRecord) -> None:
        table = self.table(shape)
        with table.transaction() as transaction:
            change = _iceberg_files.FileChange(transaction, table)
            change.remove(task.file for task in _iceberg_files.plan(table, AlwaysTrue()))
            change.write(versions.cast(history_schema(shape)))
            _iceberg_files.replace(change, {**record.to_properties(), LOAD: "true"}, always=True)

    def undo_load(self, shape: TableShape) -> bool:
        table = self.table(shape)
        if _summary(table).get(LOAD) != "true":
            return False
        snapshot = table.current_snapshot()
        parent = None if snapshot is None else snapshot.parent_snapshot_id
        if parent is None:
            self.drop(shape)
            self.create(shape)
        else:
            table.manage_snapshots().set_current_snapshot(parent).commit()
        return True

    def rename(self, before: TableShape, after: TableShape) -> None:
        self.tables.catalog.create_namespace_if_not_exists((after.schema,))
        self.tables.catalog.rename_table(self.identifier(before), self.identifier(after))

    def drop(self, shape: TableShape) -> None:
        if self.exists(shape):
            self.tables.catalog.purge_table(self.identifier(shape))
