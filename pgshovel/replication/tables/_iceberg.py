"""A set's tables as Iceberg tables (pyiceberg, SQL catalog): create, commit, read the position.

The catalog is pyiceberg's SQL catalog: a SQLite file under the warehouse by
default, or any SQLAlchemy URL. A table is ``<schema>.<table>`` in the catalog
(namespace = the source schema) and its files live under
``<warehouse>/<schema>/<table>`` (names escaped as for Delta). One micro-batch
is one catalog commit holding one snapshot per touched table: the files whose
statistics overlap the first key column's range are read, those holding a
touched key are replaced by their other rows — split into the rows below,
within and above the range, so that the next micro-batch near it rewrites
only the rows within (``split_at``) — and the surviving rows of the net
effect are added (``_iceberg_files``) — after a TRUNCATE, every file is
removed instead. The ``CommitRecord`` is stored twice: in the snapshot's
summary (the history that time travel searches) and in the table's properties
(the position, read back even when the micro-batch changed no row and made no
snapshot). A micro-batch whose counter the table already holds is skipped.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.expressions import (
    AlwaysTrue,
    And,
    BooleanExpression,
    GreaterThanOrEqual,
    LessThanOrEqual,
)
from pyiceberg.table import Table

from pgshovel.errors import ProgrammingError, SchemaError
from pgshovel.replication.tables import _evolve, _iceberg_files
from pgshovel.replication.tables._delta import CommitResult, table_path
from pgshovel.replication.tables._effect import CommitRecord, NetEffect, stored_schema
from pgshovel.replication.tables._evolution import Defaults, Evolution
from pgshovel.replication.targets._parquet_tables import is_in_keys
from pgshovel.source import TableShape

__all__ = ["IcebergTables", "key_bounds", "same_schema", "split_at"]

logger = logging.getLogger(__name__)

APP = "pgshovel.app"


def key_bounds(shape: TableShape, keys: pa.Table) -> BooleanExpression:
    # The files a micro-batch reads: those whose statistics overlap the first key's range.
    first = shape.key[0]
    extremes = pc.min_max(keys.column(first))
    low, high = extremes["min"].as_py(), extremes["max"].as_py()
    return And(GreaterThanOrEqual(term=first, value=low), LessThanOrEqual(term=first, value=high))


def same_schema(tables: list[pa.Table]) -> list[pa.Table]:
    """``tables`` concatenated per Arrow schema, in order of first appearance: files written
    before a schema change, or by another writer, may read back with other types (string
    and large_string) and are written as they were rather than cast."""
    groups: list[list[pa.Table]] = []
    for table in tables:
        for group in groups:
            if group[0].schema.equals(table.schema):
                group.append(table)
                break
        else:
            groups.append([table])
    return [pa.concat_tables(group) for group in groups]


def split_at(rows: pa.Table, column: str, extremes: pa.StructScalar) -> list[pa.Table]:
    """``rows`` as the rows of ``column`` below ``extremes``' min, within, and above its max
    (the empty parts left out).

    The rows a micro-batch keeps of the files it rewrites are written in these three parts
    (whatever the number of files): the next micro-batches, whose keys lie near this one's
    (an OLTP table's changes), then find the rows within the range in one file of their own
    and rewrite only it, not again the whole file of the initial snapshot (10,000 rows) the
    range once fell into, nor one more file per micro-batch."""
    values = rows.column(column)
    try:
        below = pc.fill_null(pc.less(values, extremes["min"]), False)
        above = pc.fill_null(pc.greater(values, extremes["max"]), False)
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return [rows]  # a key type Arrow does not order: one file, as it was
    within = pc.invert(pc.or_(below, above))  # nulls too: no row is left out
    parts = [rows.filter(mask) for mask in (below, within, above)]
    return [part for part in parts if part.num_rows]


class IcebergTables:
    """The tables of one set (one app id) in one SQL catalog and warehouse."""

    def __init__(
        self,
        warehouse: str | Path,
        app_id: str,
        *,
        catalog_uri: str | None = None,
        catalog_name: str = "pgshovel",
        properties: dict[str, str] | None = None,
    ) -> None:
        self.warehouse = str(warehouse).rstrip("/")
        self.app_id = app_id
        uri = catalog_uri or f"sqlite:///{self.warehouse}/catalog.db"
        if catalog_uri is None:
            Path(self.warehouse).mkdir(parents=True, exist_ok=True)
        self.catalog: Catalog = SqlCatalog(
            catalog_name, uri=uri, warehouse=self.warehouse, **(properties or {})
        )

    # -- tables ---------------------------------------------------------------------

    @staticmethod
    def identifier(shape: TableShape) -> tuple[str, str]:
        return (shape.schema, shape.name)

    def location(self, shape: TableShape) -> str:
        return table_path(self.warehouse, shape.schema, shape.name)

    def exists(self, shape: TableShape) -> bool:
        return bool(self.catalog.table_exists(self.identifier(shape)))

    def table(self, shape: TableShape) -> Table:
        try:
            return self.catalog.load_table(self.identifier(shape))
        except NoSuchTableError as error:
            raise ProgrammingError(
                f"iceberg table of {shape.qualified!r} does not exist in the catalog; "
                "create it first"
            ) from error

    def create(self, shape: TableShape) -> Table:
        """Create the (empty) table unless it exists."""
        dotted = [name for name in shape.key if "." in name]
        if dotted:
            raise SchemaError(
                f"table {shape.qualified!r}: key columns {dotted!r} contain '.', which pyiceberg's "
                "row filters read as a nested field, so rows cannot be matched by key; rename "
                "them in the source, or replicate this table to Delta Lake or PostgreSQL"
            )
        self.catalog.create_namespace_if_not_exists((shape.schema,))
        if self.exists(shape):
            return self.table(shape)
        table = self.catalog.create_table(
            self.identifier(shape),
            schema=stored_schema(shape),
            location=self.location(shape),
            properties={APP: self.app_id, "format-version": "2"},
        )
        logger.info("created iceberg table %s at %s", shape.qualified, self.location(shape))
        return table

    # -- commits --------------------------------------------------------------------

    def _check_app(self, shape: TableShape, properties: dict[str, Any]) -> None:
        owner = properties.get(APP)
        if owner is not None and owner != self.app_id:
            raise ProgrammingError(
                f"iceberg table {shape.qualified!r} is written by {owner!r}, not {self.app_id!r}; "
                "one set (app id) writes a table"
            )

    def last_commit(self, shape: TableShape) -> CommitRecord | None:
        """The record of the last micro-batch the table holds (from its properties)."""
        properties = dict(self.table(shape).properties)
        self._check_app(shape, properties)
        return CommitRecord.from_properties(properties)

    def counter(self, shape: TableShape) -> int | None:
        record = self.last_commit(shape)
        return None if record is None else record.counter

    def commit(
        self,
        effect: NetEffect,
        record: CommitRecord,
        evolution: Evolution | None = None,
        defaults: Defaults | None = None,
    ) -> CommitResult:
        """Apply ``effect`` in one catalog commit carrying ``record`` (skipped if held).

        With ``evolution`` (the table's shape changed in this micro-batch; ``effect`` is in
        the new shape) the schema update is part of the same commit (``_evolve``).
        """
        started = time.perf_counter()
        shape = effect.shape
        table = self.table(shape)
        properties = dict(table.properties)
        self._check_app(shape, properties)
        held = CommitRecord.from_properties(properties)
        if held is not None and held.counter >= record.counter:
            logger.info(
                "iceberg table %s already holds micro-batch %d (it holds %d); skipped",
                shape.qualified,
                record.counter,
                held.counter,
            )
            return CommitResult(shape.qualified, record.counter, None)
        summary = record.to_properties()
        read = 0
        with table.transaction() as transaction:
            if evolution is not None and evolution.changed:
                _evolve.update_iceberg_schema(transaction, evolution)
            change = _iceberg_files.FileChange(transaction, table)
            if effect.truncate or (evolution is not None and evolution.key_lost):
                change.remove(task.file for task in _iceberg_files.plan(table, AlwaysTrue()))
            elif evolution is not None and evolution.filled:
                read = _evolve.rewrite_iceberg_files(change, evolution, effect, defaults or {})
            elif effect.rows.num_rows:
                keys = effect.rows.select(list(shape.key))
                tasks = _iceberg_files.plan(table, key_bounds(shape, keys))
                kept: list[pa.Table] = []
                for task in tasks:
                    rows = change.read([task])
                    touched = is_in_keys(rows, keys, shape.key)
                    if pc.any(touched).as_py():
                        change.remove([task.file])
                        kept.append(rows.filter(pc.invert(touched)))
                extremes = pc.min_max(keys.column(shape.key[0]))
                for rows in same_schema(kept):
                    for part in split_at(rows, shape.key[0], extremes):
                        change.write(part)
                read = len(tasks)
            change.write(effect.upserts())
            _iceberg_files.replace(change, summary)
            transaction.set_properties(summary)
        table = self.table(shape)
        snapshot = table.current_snapshot()
        return CommitResult(
            shape.qualified,
            record.counter,
            None if snapshot is None else snapshot.snapshot_id,
            files_scanned=read,
            seconds=time.perf_counter() - started,
        )

    def read(self, shape: TableShape, snapshot_id: int | None = None) -> pa.Table:
        """The table's rows (at ``snapshot_id``), through pyiceberg's scan."""
        return self.table(shape).scan(snapshot_id=snapshot_id).to_arrow()
