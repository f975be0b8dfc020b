"""RENAME TABLE and DROP TABLE from the stream, for Delta and Iceberg copies.

Delta: a table is its directory (the log holds relative paths), so a rename
moves the directory in one ``rename`` (atomic on a local or mounted
filesystem; object stores have no rename, and there the rename is refused
with the remedy). A drop removes the directory. Iceberg: the catalog renames
and drops (``purge``: the files go too); the files of a renamed table stay
where they are, the catalog points at them. Each returns one line saying what
it did.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from pgshovel.errors import SchemaError
from pgshovel.replication.tables._delta import DeltaTables
from pgshovel.replication.tables._iceberg import IcebergTables
from pgshovel.source import TableShape

__all__ = ["drop_delta", "drop_iceberg", "rename_delta", "rename_iceberg"]

logger = logging.getLogger(__name__)


def _local(path: str) -> Path | None:
    if "://" in path and not path.startswith("file://"):
        return None
    return Path(path.removeprefix("file://"))


def rename_delta(tables: DeltaTables, before: TableShape, after: TableShape) -> str:
    """Move ``before``'s Delta table to ``after``'s name."""
    source, target = _local(tables.path(before)), _local(tables.path(after))
    if source is None or target is None:
        raise SchemaError(
            f"table {before.qualified!r} was renamed to {after.qualified!r}, and a Delta table on "
            f"{tables.root!r} cannot be renamed (object stores have no rename); copy the table "
            f"again under its new name with 'pgshovel-admin set resnapshot SET {after.qualified}'"
        )
    if target.exists():
        raise SchemaError(
            f"table {before.qualified!r} was renamed to {after.qualified!r}, but {target} already "
            f"exists; remove it, then restart the worker"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(source, target)
    tables.forget(before)
    tables.forget(after)
    line = f"moved delta table {before.qualified!r} to {after.qualified!r} ({target})"
    logger.info("%s", line)
    return line


def drop_delta(tables: DeltaTables, shape: TableShape) -> str:
    """Remove the Delta table of a dropped source table."""
    path = _local(tables.path(shape))
    if path is None:
        raise SchemaError(
            f"table {shape.qualified!r} was dropped; the worker cannot remove "
            f"{tables.path(shape)!r} from an object store: delete that prefix with the store's "
            "own tools"
        )
    if path.exists():
        shutil.rmtree(path)
    tables.forget(shape)
    line = f"removed delta table {shape.qualified!r} ({path})"
    logger.info("%s", line)
    return line


def rename_iceberg(tables: IcebergTables, before: TableShape, after: TableShape) -> str:
    tables.catalog.create_namespace_if_not_exists((after.schema,))
    tables.catalog.rename_table(tables.identifier(before), tables.identifier(after))
    line = f"renamed iceberg table {before.qualified!r} to {after.qualified!r}"
    logger.info("%s", line)
    return line


def drop_iceberg(tables: IcebergTables, shape: TableShape) -> str:
    if tables.exists(shape):
        tables.catalog.purge_table(tables.identifier(shape))
    line = f"dropped iceberg table {shape.qualified!r} and its files"
    logger.info("%s", line)
    return line
