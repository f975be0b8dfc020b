"""A table's shape change as the table formats follow it: what changes, what needs a re-copy.

``plan`` compares two shapes column by column — matched by ``attnum``, which
survives a rename, as the Parquet target does — and says what the copy must
do: add columns (existing rows get the value the source's rows got, or NULL),
rename, drop, widen a type by an exact cast (int2 -> int4 -> int8,
float4 -> float8, same storage type), and which columns no cast can carry:
their stored values become NULL and the table must be copied again while
streaming (``recopy``; a key column among them empties the table first). Both
formats apply a plan in the micro-batch's single commit for the table (see
``_evolve``), and report it; none is ever applied silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from pgshovel.protocol import stream_pb2
from pgshovel.replication.tables._effect import CHANGE_FIELDS, DELETED, stored_schema
from pgshovel.replication.targets._arrow import arrow_type, converts_exactly
from pgshovel.replication.targets._parquet_tables import evolve
from pgshovel.source import TableShape

__all__ = ["Defaults", "Evolution", "evolve_rows", "plan"]

#: The values existing rows got for added columns (a schema event's ``defaults``).
Defaults = Mapping[str, stream_pb2.Value]


@dataclass(frozen=True)
class Evolution:
    """What following ``before`` -> ``after`` does to a copy (see the module docstring)."""

    before: TableShape
    after: TableShape
    added: tuple[str, ...] = ()
    #: added columns whose existing rows get a value (not NULL): rows are rewritten
    filled: tuple[str, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()
    dropped: tuple[str, ...] = ()
    widened: tuple[str, ...] = ()
    #: columns whose stored values no cast carries: NULL until the table is copied again
    recopy: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.added or self.renamed or self.dropped or self.widened or self.recopy)

    @property
    def key_lost(self) -> bool:
        """A key column cannot keep its values: the table is emptied, then copied again."""
        return any(name in self.after.key for name in self.recopy)

    @property
    def rewrites(self) -> bool:
        """Whether stored rows must be rewritten (a format that cannot change them in place)."""
        return bool(self.filled or self.renamed or self.dropped or self.widened or self.recopy)

    def describe(self) -> list[str]:
        """What was done, one line per change, for logs and reports."""
        table = self.after.qualified
        lines = [f"table {table!r}: added column {name!r}" for name in self.added]
        lines += [f"table {table!r}: renamed column {a!r} to {b!r}" for a, b in self.renamed]
        lines += [f"table {table!r}: dropped column {name!r}" for name in self.dropped]
        lines += [f"table {table!r}: widened column {name!r}" for name in self.widened]
        lines += [
            f"table {table!r}: column {name!r} changed type beyond an exact cast; the table "
            "needs a re-copy"
            for name in self.recopy
        ]
        return lines


def plan(before: TableShape, after: TableShape, defaults: Defaults | None = None) -> Evolution:
    """What the copy does to follow ``before`` -> ``after`` (``defaults``: the values existing
    rows got for added columns, as the schema event carries them)."""
    stored_schema(after)  # refuses reserved column names
    defaults = defaults or {}
    old = {column.number: column for column in before.columns}
    kept = {column.number for column in after.columns}
    added: list[str] = []
    filled: list[str] = []
    renamed: list[tuple[str, str]] = []
    widened: list[str] = []
    recopy: list[str] = []
    for column in after.columns:
        previous = old.get(column.number)
        if previous is None:
            added.append(column.name)
            value = defaults.get(column.name)
            if value is not None and value.WhichOneof("kind") != "null":
                filled.append(column.name)
            continue
        if previous.name != column.name:
            renamed.append((previous.name, column.name))
        if arrow_type(previous) != arrow_type(column):
            (widened if converts_exactly(previous, column) else recopy).append(column.name)
        elif not converts_exactly(previous, column):
            recopy.append(column.name)
    dropped = [column.name for column in before.columns if column.number not in kept]
    return Evolution(
        before,
        after,
        tuple(added),
        tuple(filled),
        tuple(renamed),
        tuple(dropped),
        tuple(widened),
        tuple(recopy),
    )


def evolve_rows(rows: pa.Table, evolution: Evolution, defaults: Defaults | None = None) -> pa.Table:
    """Stored rows (or a net effect's rows) of ``before``'s shape as rows of ``after``'s.

    The shape's columns go through the Parquet target's ``evolve`` (the same
    conversion, so both targets agree); the change columns and the deleted flag
    are carried over unchanged.
    """
    names = list(evolution.before.column_names)
    values = evolve(rows.select(names), evolution.before, evolution.after, defaults or {})
    if values.num_rows != rows.num_rows:  # a key column lost its values: nothing is kept
        schema = stored_schema(evolution.after)
        if DELETED in rows.column_names:
            schema = schema.append(rows.schema.field(DELETED))
        return schema.empty_table()
    extra = list(CHANGE_FIELDS) + (
        [rows.schema.field(DELETED)] if DELETED in rows.column_names else []
    )
    for field in extra:
        values = values.append_column(field, rows.column(field.name))
    return values
