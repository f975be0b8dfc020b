"""Compare a replicated table in the source and the target: row count and an md5 of every row.

The checksum is ``md5`` over each row's text form (``t::text``), joined in key
order, computed by each server itself, so no rows travel to the demo. Both
sessions use the same ``TimeZone`` and float settings so equal values print
equally. Only the columns the target has are compared: a set may capture a
subset of a table's columns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import cursor as Cursor

from example._report import TableComparison
from pgshovel.errors import DatabaseError

SESSION_SETTINGS = "SET TimeZone = 'UTC'; SET extra_float_digits = 3; SET DateStyle = 'ISO, YMD'"

TableSpec = tuple[str, str, Sequence[str]]  # schema, table, key columns (empty: primary key)


def compare_tables(
    source_dsn: str, target_dsn: str, tables: Iterable[TableSpec]
) -> list[TableComparison]:
    """Count and checksum every table on both sides."""
    source = psycopg2.connect(source_dsn, application_name="pgshovel-demo compare")
    target = psycopg2.connect(target_dsn, application_name="pgshovel-demo compare")
    try:
        source.autocommit = target.autocommit = True
        with source.cursor() as source_cursor, target.cursor() as target_cursor:
            source_cursor.execute(SESSION_SETTINGS)
            target_cursor.execute(SESSION_SETTINGS)
            return [
                _compare(source_cursor, target_cursor, schema, name, key)
                for schema, name, key in tables
            ]
    except psycopg2.Error as error:
        raise DatabaseError(f"comparing the tables failed: {str(error).strip()}") from error
    finally:
        source.close()
        target.close()


def _compare(
    source: Cursor, target: Cursor, schema: str, name: str, key: Sequence[str]
) -> TableComparison:
    label = name if schema == "public" else f"{schema}.{name}"
    key = list(key) or primary_key(source, schema, name)
    target_columns = columns(target, schema, name)
    compared = target_columns or columns(source, schema, name)
    source_rows, source_sum = checksum(source, schema, name, compared, key)
    if not target_columns:
        return TableComparison(label, source_rows, None, source_sum, None)
    target_rows, target_sum = checksum(target, schema, name, compared, key)
    return TableComparison(label, source_rows, target_rows, source_sum, target_sum)


def columns(cursor: Cursor, schema: str, name: str) -> list[str]:
    """The table's column names in order; empty when the table does not exist."""
    cursor.execute(
        "SELECT a.attname FROM pg_attribute a"
        " WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped"
        " ORDER BY a.attnum",
        (sql.Identifier(schema, name).as_string(cursor),),
    )
    return [row[0] for row in cursor.fetchall()]


def primary_key(cursor: Cursor, schema: str, name: str) -> list[str]:
    cursor.execute(
        "SELECT a.attname FROM pg_index i"
        " CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, position)"
        " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum"
        " WHERE i.indrelid = to_regclass(%s) AND i.indisprimary ORDER BY k.position",
        (sql.Identifier(schema, name).as_string(cursor),),
    )
    key = [row[0] for row in cursor.fetchall()]
    if not key:
        raise DatabaseError(
            f"table {schema!r}.{name!r} has no primary key in the source: cannot order its rows "
            "for a checksum; declare key_columns for it in set.yml"
        )
    return key


def checksum(
    cursor: Cursor, schema: str, name: str, compared: Sequence[str], key: Sequence[str]
) -> tuple[int, str]:
    """``(rows, md5 of the rows' text in key order)`` of ``compared`` columns."""
    cursor.execute(checksum_statement(schema, name, compared, key))
    row = cursor.fetchone()
    if row is None:
        raise DatabaseError(f"the checksum of {schema!r}.{name!r} returned no row")
    return int(row[0]), str(row[1])


def checksum_statement(
    schema: str, name: str, compared: Sequence[str], key: Sequence[str]
) -> sql.Composed:
    return sql.SQL(
        "SELECT count(*), md5(coalesce(string_agg(t::text, E'\\n' ORDER BY {order}), ''))"
        " FROM (SELECT {columns} FROM {table}) AS t"
    ).format(
        order=sql.SQL(", ").join(sql.Identifier("t", column) for column in key),
        columns=sql.SQL(", ").join(sql.Identifier(column) for column in compared),
        table=sql.Identifier(schema, name),
    )
