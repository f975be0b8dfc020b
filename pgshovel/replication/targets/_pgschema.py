"""Schema changes replayed on a PostgreSQL target: the DDL that turns one table shape into another.

Columns are matched by number (``attnum``), which survives a rename, so a
rename is a rename and not a drop and an add. The order is fixed: the table's
new name, dropped columns, renamed columns (through temporary names when two
names swap), changed types, added columns, and last the key. An added column
whose existing rows got one constant value gets it (``DEFAULT`` then ``DROP
DEFAULT``); a type changed by a cast that gives the same values everywhere is
replayed with that cast. When the table is going to be copied again anyway
(``recopy``), values the copy cannot compute are left NULL (or, for a key
column, the table is emptied) and the incremental re-snapshot fills them.
"""

from __future__ import annotations

from collections.abc import Mapping

from psycopg2 import sql
from psycopg2.extensions import cursor as Cursor

from pgshovel.source import Column, TableShape, cast_is_exact

_PRIMARY_KEY = (
    "SELECT con.conname FROM pg_catalog.pg_constraint con "
    "JOIN pg_catalog.pg_class c ON c.oid = con.conrelid "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = %s AND c.relname = %s AND con.contype = 'p'"
)


def _alter(table: TableShape, action: sql.Composable) -> sql.Composable:
    return sql.SQL("ALTER TABLE {} {}").format(sql.Identifier(table.schema, table.name), action)


def rename_table(cursor: Cursor, before: TableShape, after: TableShape) -> TableShape:
    """Give the table ``after``'s schema and name; return ``before`` under its new name."""
    current = before
    if before.schema != after.schema:
        cursor.execute(
            sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(after.schema))
        )
        cursor.execute(
            _alter(current, sql.SQL("SET SCHEMA {}").format(sql.Identifier(after.schema)))
        )
        current = TableShape(after.schema, current.name, current.columns, current.key)
    if before.name != after.name:
        cursor.execute(_alter(current, sql.SQL("RENAME TO {}").format(sql.Identifier(after.name))))
    return TableShape(after.schema, after.name, before.columns, before.key, before.relation)


def alter_columns(
    cursor: Cursor,
    before: TableShape,
    after: TableShape,
    defaults: Mapping[str, str | None],
    recopy: bool,
) -> None:
    """Turn the columns and key of ``before`` (already named as ``after``) into ``after``'s."""
    table = after
    old = {column.number: column for column in before.columns}
    new = {column.number: column for column in after.columns}
    for number, column in old.items():
        if number not in new:
            cursor.execute(
                _alter(table, sql.SQL("DROP COLUMN {}").format(sql.Identifier(column.name)))
            )
    renames = [(old[n].name, new[n].name) for n in new if n in old and old[n].name != new[n].name]
    for index, (source, _) in enumerate(renames):
        cursor.execute(
            _alter(
                table,
                sql.SQL("RENAME COLUMN {} TO {}").format(
                    sql.Identifier(source), sql.Identifier(f"pgshovel rename {index}")
                ),
            )
        )
    for index, (_, target) in enumerate(renames):
        cursor.execute(
            _alter(
                table,
                sql.SQL("RENAME COLUMN {} TO {}").format(
                    sql.Identifier(f"pgshovel rename {index}"), sql.Identifier(target)
                ),
            )
        )
    emptied = False
    for number, column in new.items():
        previous = old.get(number)
        if previous is None or previous.sql_type == column.sql_type:
            continue
        exact = cast_is_exact(previous, column)
        if not exact and column.name in after.key and not emptied:
            # A key value the copy cannot convert: the re-snapshot brings every row back.
            cursor.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(table.schema, table.name)))
            emptied = True
        _change_type(cursor, table, column, exact or emptied or not recopy)
    for number, column in new.items():
        if number not in old:
            _add_column(cursor, table, column, defaults)
    if before.key != after.key:
        _replace_key(cursor, table, after.key)


def _change_type(cursor: Cursor, table: TableShape, column: Column, convert: bool) -> None:
    name = sql.Identifier(column.name)
    using = (
        sql.SQL("{}::{}").format(name, sql.SQL(column.sql_type))
        if convert
        else sql.SQL("NULL::{}").format(sql.SQL(column.sql_type))
    )
    cursor.execute(
        _alter(
            table,
            sql.SQL("ALTER COLUMN {} TYPE {} USING {}").format(
                name, sql.SQL(column.sql_type), using
            ),
        )
    )


def _add_column(
    cursor: Cursor, table: TableShape, column: Column, defaults: Mapping[str, str | None]
) -> None:
    name = sql.Identifier(column.name)
    definition = sql.SQL("ADD COLUMN {} {}").format(name, sql.SQL(column.sql_type))
    if column.name not in defaults or defaults[column.name] is None:
        cursor.execute(_alter(table, definition))
        return
    value = sql.SQL("{}::{}").format(sql.Literal(defaults[column.name]), sql.SQL(column.sql_type))
    cursor.execute(_alter(table, sql.SQL("{} DEFAULT {}").format(definition, value)))
    cursor.execute(_alter(table, sql.SQL("ALTER COLUMN {} DROP DEFAULT").format(name)))


def _replace_key(cursor: Cursor, table: TableShape, key: tuple[str, ...]) -> None:
    cursor.execute(_PRIMARY_KEY, (table.schema, table.name))
    for (constraint,) in cursor.fetchall():
        cursor.execute(
            _alter(table, sql.SQL("DROP CONSTRAINT {}").format(sql.Identifier(constraint)))
        )
    if key:
        columns = sql.SQL(", ").join(sql.Identifier(name) for name in key)
        cursor.execute(_alter(table, sql.SQL("ADD PRIMARY KEY ({})").format(columns)))


def drop_table(cursor: Cursor, table: TableShape) -> None:
    cursor.execute(
        sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table.schema, table.name))
    )
