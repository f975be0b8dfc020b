"""The shape of a captured table: its columns in order, their types, its key.

A ``TableShape`` is what a copy of the table must look like: the captured
columns (every column unless the set lists some, the key always included) with
the type each has in the source and the key rows are matched on. The catalog
reader builds it; it travels in the stream with schema changes; the relay
decodes values with it and the targets create and change tables from it.
Plain frozen values: they pickle into Spark tasks and compare by value.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class Column:
    """One column: its name, SQL type (``format_type``), base type name and nullability.

    ``type_name`` is the ``pg_type.typname`` the codec decodes by: a domain's base
    type, and ``_`` + the base type for an array of a domain. ``number`` is the
    column's ``attnum``, which survives a rename (0 when not known).
    """

    name: str
    sql_type: str
    type_name: str
    not_null: bool = False
    number: int = 0


@dataclass(frozen=True)
class TableShape:
    """A captured table: its columns in order and its key (empty when unkeyed)."""

    schema: str
    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    #: the table's oid in the source (survives a rename; 0 when not known)
    relation: int = 0

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def identity(self) -> tuple[str, str]:
        return (self.schema, self.name)

    # Cached: hot loops of the worker ask for them once per row. A frozen
    # dataclass still takes cached_property (it writes the instance's __dict__).
    @cached_property
    def column_names(self) -> tuple[str, ...]:
        return tuple(column.name for column in self.columns)

    @cached_property
    def key_positions(self) -> tuple[int, ...]:
        names = self.column_names
        return tuple(names.index(key) for key in self.key)

    def column(self, name: str) -> Column | None:
        for column in self.columns:
            if column.name == name:
                return column
        return None


@dataclass(frozen=True)
class KeyRange:
    """Rows of one table whose key is ``>= lower`` and ``< upper`` (None: unbounded).

    Bounds are key values in PostgreSQL's text form, compared as row values in
    the key's column order. ``index`` numbers the ranges of one split.
    """

    table: TableShape
    index: int
    lower: tuple[str, ...] | None
    upper: tuple[str, ...] | None
