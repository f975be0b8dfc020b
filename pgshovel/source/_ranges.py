"""Split a table into key ranges for parallel snapshot reads.

Boundaries come from a sorted sample of keys (text forms, in key order); the
ranges are ``(-inf, b1) [b1, b2) ... [bn, +inf)`` so they cover every key
exactly once whatever the boundaries are: a poor sample only makes ranges
uneven, never wrong. Composite keys compare as row values, ``(a, b) >= (x, y)``.
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg2 import sql

from pgshovel.source._shape import KeyRange, TableShape

Key = tuple[str, ...]


def pick_boundaries(sorted_sample: Sequence[Key], parts: int) -> list[Key]:
    """Choose at most ``parts - 1`` distinct, ascending boundaries evenly through the sample."""
    if parts <= 1 or not sorted_sample:
        return []
    boundaries: list[Key] = []
    size = len(sorted_sample)
    for part in range(1, parts):
        candidate = sorted_sample[(part * size) // parts]
        if candidate != sorted_sample[0] and (not boundaries or candidate != boundaries[-1]):
            boundaries.append(candidate)
    return boundaries


def make_ranges(table: TableShape, boundaries: Sequence[Key]) -> list[KeyRange]:
    """The ranges between consecutive boundaries, unbounded at both ends."""
    lowers: list[Key | None] = [None, *boundaries]
    uppers: list[Key | None] = [*boundaries, None]
    return [
        KeyRange(table=table, index=index, lower=lower, upper=upper)
        for index, (lower, upper) in enumerate(zip(lowers, uppers, strict=True))
    ]


def own_rows(table: TableShape) -> sql.Composable:
    """The table in a FROM clause, its own rows only (``ONLY``).

    A table in an inheritance tree is a table of its own to pgshovel: its
    triggers capture its rows, and a statement on a parent changing a child's
    rows fires the child's. A parent read without ``ONLY`` would bring its
    children's rows into its copy, where no event of theirs ever reaches them.
    """
    return sql.SQL("ONLY {}").format(sql.Identifier(table.schema, table.name))


def _row(values: Sequence[sql.Composable]) -> sql.Composable:
    return sql.SQL("({})").format(sql.SQL(", ").join(values))


#: Key types whose order depends on a collation: compared byte by byte (``COLLATE "C"``)
#: where two databases must agree on which rows a range holds.
COLLATABLE = frozenset({"text", "varchar", "bpchar"})


def key_columns(
    table: TableShape, alias: str | None = None, byte_order: bool = False
) -> list[sql.Composable]:
    """The key columns as SQL, text ones in byte order when asked (every database agrees)."""
    columns: list[sql.Composable] = []
    for name in table.key:
        identifier = sql.Identifier(alias, name) if alias else sql.Identifier(name)
        column = table.column(name)
        if byte_order and column is not None and column.type_name in COLLATABLE:
            columns.append(sql.SQL('{} COLLATE "C"').format(identifier))
        else:
            columns.append(identifier)
    return columns


def range_predicate(
    key_range: KeyRange, alias: str | None = None, byte_order: bool = False
) -> sql.Composable:
    """A WHERE condition selecting the range's rows (``TRUE`` for an unbounded range).

    ``byte_order`` compares text keys in byte order, the same in every database
    whatever its default collation (the incremental snapshots compare source and
    target by range).
    """
    columns = _row(key_columns(key_range.table, alias, byte_order))
    conditions: list[sql.Composable] = []
    if key_range.lower is not None:
        lower = _row([sql.Literal(value) for value in key_range.lower])
        conditions.append(sql.SQL("{} >= {}").format(columns, lower))
    if key_range.upper is not None:
        upper = _row([sql.Literal(value) for value in key_range.upper])
        conditions.append(sql.SQL("{} < {}").format(columns, upper))
    if not conditions:
        return sql.SQL("TRUE")
    return sql.SQL(" AND ").join(conditions)
