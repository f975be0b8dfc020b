"""A Delta Lake or Iceberg copy read back through its format's own reader, as PostgreSQL's text.

``read_table`` opens a table with ``deltalake.DeltaTable`` or pyiceberg's SQL
catalog (never through pgshovel's tables library), keeps the source's columns
(the change columns ``_pgshovel_*`` are the copy's own) and returns their
names and the rows with every value as PostgreSQL prints it, sorted, so they
compare with ``_targets.source_rows``.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable
from pyiceberg.catalog.sql import SqlCatalog

from pgshovel.replication.targets import _arrow, _parquet_chunks
from pgshovel.source import TableShape

#: the prefix of the columns a table format copy adds
CHANGE_PREFIX = "_pgshovel_"


def delta_path(root: Path, schema: str, name: str) -> Path:
    return root / schema / name  # plain ASCII names need no escaping


def read_arrow(kind: str, root: Path, schema: str, name: str) -> pa.Table:
    if kind == "delta":
        return DeltaTable(str(delta_path(root, schema, name))).to_pyarrow_table()
    catalog = SqlCatalog("pgshovel", uri=f"sqlite:///{root}/catalog.db", warehouse=str(root))
    return catalog.load_table((schema, name)).scan().to_arrow()


def read_table(
    kind: str, root: Path, shape: TableShape
) -> tuple[list[str], list[tuple[str | None, ...]]]:
    """(column names, rows as text sorted) of the copy of ``shape`` in ``root``."""
    table = read_arrow(kind, root, shape.schema, shape.name)
    names = [name for name in table.column_names if not name.startswith(CHANGE_PREFIX)]
    values = table.select(list(shape.column_names)).cast(_arrow.table_schema(shape))
    rows = [
        tuple(_parquet_chunks.texts(shape, row)) for row in _parquet_chunks.rows_as_python(values)
    ]
    return names, sorted(rows, key=repr)
