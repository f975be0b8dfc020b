"""The Iceberg target: the set's tables in an Iceberg SQL catalog and warehouse (pyiceberg).

A thin adapter over ``pgshovel.replication.tables`` (``IcebergTables``); what
it shares with the Delta target is in ``_tablefmt``. The catalog is a SQLite
file ``<warehouse>/catalog.db`` unless ``catalog_uri`` names another
SQLAlchemy URL; a table is ``<schema>.<table>`` in it, its files under
``<warehouse>/<schema>/<table>``. Each micro-batch is one snapshot per touched
table whose summary (and the table's properties) carry the micro-batch's
counter and the stream position. The worker's own files are under
``<warehouse>/_pgshovel/``. Read a table with pyiceberg's ``SqlCatalog``,
DuckDB's ``iceberg_scan`` or Spark with the Iceberg runtime. Needs the
``tables`` extra (``pip install 'pgshovel[tables]'``). ``history`` is refused: the
SCD2 history is kept by the Delta target only.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.expressions import (
    And,
    BooleanExpression,
    GreaterThanOrEqual,
    LessThanOrEqual,
)

from pgshovel.errors import ConfigurationError
from pgshovel.settings import NonEmptyText, PositiveInt
from pgshovel.source import TableShape

try:
    from pgshovel.replication.tables._ddl import drop_iceberg, rename_iceberg
    from pgshovel.replication.tables._iceberg import IcebergTables
    from pgshovel.replication.tables._maintenance import Maintenance, MaintenanceReport
    from pgshovel.replication.tables._snapshot import WrittenFile, commit_iceberg_snapshot
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"the iceberg target needs the tables extra: pip install 'pgshovel[tables]' ({error})"
    ) from error

from pgshovel.replication.targets._tablefmt import TableFormatTarget
from pgshovel.replication.targets._tablefmt_upkeep import upkeep_policy

__all__ = ["IcebergTarget"]


class IcebergTarget(TableFormatTarget):
    """Replicates into Iceberg tables of a SQL catalog, files under ``warehouse``."""

    kind = "iceberg"
    snapshot_suffix = "/data"

    def __init__(
        self,
        warehouse: NonEmptyText,
        catalog_uri: str | None = None,
        maintenance: bool = True,
        max_small_files: PositiveInt = 16,
        history: bool | list[str] = False,
    ) -> None:
        if history:
            raise ConfigurationError(
                "target history: the iceberg target keeps no SCD2 history yet; use "
                "'type: delta' for tables that need one, or remove 'history'"
            )
        super().__init__(Path(warehouse), upkeep_policy(maintenance, max_small_files))
        self.warehouse = warehouse
        self.catalog_uri = catalog_uri

    def _make_tables(self, app_id: str) -> IcebergTables:
        return IcebergTables(self.root, app_id, catalog_uri=self.catalog_uri)

    def _maintain(self, maintenance: Maintenance, shape: TableShape) -> MaintenanceReport:
        return maintenance.maintain_iceberg(self.tables, shape)

    def _reset_table(self, shape: TableShape) -> None:
        tables: IcebergTables = self.tables
        if tables.exists(shape):
            tables.catalog.drop_table(tables.identifier(shape))
        shutil.rmtree(tables.location(shape), ignore_errors=True)
        tables.create(shape)

    def _commit_snapshot(
        self, shape: TableShape, files: Sequence[WrittenFile], record: Any
    ) -> None:
        commit_iceberg_snapshot(self.tables, shape, files, record)

    def _rename_table(self, before: TableShape, after: TableShape) -> None:
        rename_iceberg(self.tables, before, after)

    def _drop_table(self, shape: TableShape) -> None:
        drop_iceberg(self.tables, shape)

    def _read_between(self, shape: TableShape, name: str, low: Any, high: Any) -> pa.Table:
        bounds: list[BooleanExpression] = []
        if low is not None:
            bounds.append(GreaterThanOrEqual(term=name, value=low))
        if high is not None:
            bounds.append(LessThanOrEqual(term=name, value=high))
        condition = bounds[0] if len(bounds) == 1 else And(bounds[0], bounds[1])
        table: pa.Table = self.tables.table(shape).scan(row_filter=condition).to_arrow()
        return table
