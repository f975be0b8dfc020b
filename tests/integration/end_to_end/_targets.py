"""The copy under test (PostgreSQL, Parquet, Delta, Iceberg), read one way: progress, columns, rows.

``make_target`` makes the target's configuration (a scratch database or a
directory under the test's tmp_path) and returns what tests ask of it: the
stored stream offset and the number of snapshot tasks, a table's columns
(names and types) and its rows as PostgreSQL's text, sorted, just as
``source_columns`` and ``source_rows`` read the source.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from psycopg2 import sql

from pgshovel.replication.targets.parquet import read_current_text
from pgshovel.source import TableShape, connect
from pgshovel.stream.state import WorkerState
from tests.integration.capture._capture import SET
from tests.stored_state import (
    applied_offset,
    parquet_state,
    postgres_state,
    table_format_state,
)

from ._tableformats import read_table

POSTGRES = "pgshovel.replication.targets.postgresql:PostgresTarget"
PARQUET = "pgshovel.replication.targets.parquet:ParquetTarget"


def source_columns(dsn: str, table: str) -> list[tuple[str, str]]:
    connection = connect(dsn, "pgshovel-tests")
    with connection, connection.cursor() as cursor:
        cursor.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            (f"public.{table}",),
        )
        columns = [(str(name), str(kind)) for name, kind in cursor.fetchall()]
    connection.close()
    return columns


def source_rows(dsn: str, table: str) -> list[tuple[str | None, ...]]:
    """Rows as PostgreSQL prints them, every value as text, sorted."""
    connection = connect(dsn, "pgshovel-tests")
    with connection, connection.cursor() as cursor:
        columns = [name for name, _ in source_columns(dsn, table)]
        cursor.execute(
            sql.SQL("SELECT {} FROM {}").format(
                sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in columns),
                sql.Identifier("public", table),
            )
        )
        rows = [tuple(row) for row in cursor.fetchall()]
    connection.close()
    return sorted(rows, key=repr)


def _progress(state: WorkerState | None) -> tuple[int | None, int]:
    return applied_offset(state), 0 if state is None else len(state.tasks)


def postgres_progress(target: str, cluster: str) -> tuple[int | None, int]:
    return _progress(postgres_state(target, cluster, SET))


def parquet_progress(path: Path) -> tuple[int | None, int]:
    return _progress(parquet_state(path))


def parquet_columns(path: Path, table: str) -> list[tuple[str, str]]:
    state = parquet_state(path)
    shape = None if state is None else state.table("public", table)
    if shape is None:
        raise AssertionError(f"the Parquet target does not hold public.{table}")
    return [(column.name, column.sql_type) for column in shape.columns]


@dataclass(frozen=True)
class TargetUnderTest:
    """A PostgreSQL (``dsn``) or Parquet (``path``) copy of the set of ``cluster``."""

    cluster: str
    spec: dict[str, Any]
    dsn: str = ""
    path: Path | None = None
    #: "delta" or "iceberg": a table format copy under ``root``
    table_format: str = ""
    root: Path | None = None

    def state(self) -> WorkerState | None:
        """A table format copy's stored state."""
        assert self.root is not None
        return table_format_state(self.root, self.cluster, SET)

    def shape(self, table: str) -> TableShape:
        state = self.state()
        shape = None if state is None else state.table("public", table)
        if shape is None:
            raise AssertionError(f"the {self.table_format} target does not hold public.{table}")
        return shape

    def progress(self) -> tuple[int | None, int]:
        """(stored stream offset or None, snapshot tasks left)."""
        if self.table_format:
            return _progress(self.state())
        if self.path is not None:
            return parquet_progress(self.path)
        return postgres_progress(self.dsn, self.cluster)

    def columns(self, table: str) -> list[tuple[str, str]]:
        if self.table_format:
            assert self.root is not None
            shape = self.shape(table)
            names, _ = read_table(self.table_format, self.root, shape)
            assert names == list(shape.column_names), (
                f"{table}: the table's own columns {names!r}, the stored shape's "
                f"{list(shape.column_names)!r}"
            )
            return [(column.name, column.sql_type) for column in shape.columns]
        if self.path is not None:
            return parquet_columns(self.path, table)
        return source_columns(self.dsn, table)

    def holds(self, table: str) -> bool:
        """Whether the copy still has ``public.table`` (state and data)."""
        if self.table_format:
            state = self.state()
            return state is not None and state.table("public", table) is not None
        if self.path is not None:
            state = parquet_state(self.path)
            return state is not None and state.table("public", table) is not None
        connection = connect(self.dsn, "pgshovel-tests")
        with connection, connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass(%s)", (f"public.{table}",))
            row = cursor.fetchone()
        connection.close()
        return row is not None and row[0] is not None

    def rows(self, table: str) -> list[tuple[str | None, ...]]:
        if self.table_format:
            assert self.root is not None
            return read_table(self.table_format, self.root, self.shape(table))[1]
        if self.path is not None:
            return sorted(read_current_text(str(self.path), "public", table), key=repr)
        return source_rows(self.dsn, table)


def make_target(
    kind: str, make_database: Callable[[str], str], tmp_path: Path, cluster: str
) -> TargetUnderTest:
    """A fresh copy of ``kind`` ("postgresql", "parquet", "delta" or "iceberg") for one test."""
    if kind in ("delta", "iceberg"):
        root = tmp_path / kind
        key = "path" if kind == "delta" else "warehouse"
        return TargetUnderTest(
            cluster, {"type": kind, key: str(root)}, table_format=kind, root=root
        )
    if kind == "postgresql":
        dsn = make_database("target")
        return TargetUnderTest(cluster, {"path": POSTGRES, "configuration": {"dsn": dsn}}, dsn=dsn)
    path = tmp_path / "parquet"
    return TargetUnderTest(
        cluster, {"path": PARQUET, "configuration": {"path": str(path)}}, path=path
    )
