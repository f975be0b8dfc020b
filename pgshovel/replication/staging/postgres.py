"""Staging a micro-batch in a PostgreSQL target from Spark tasks, and committing it once.

A task COPYs each table's net effect (``reduce.StagedTable``) into an unlogged
table of its own in ``pgshovel_replication`` and commits: nothing the copy's
readers see changes. Keyed tables stage typed columns (the target table's, no
constraints) plus the change's place and a deleted flag; unkeyed tables stage
each signed row as its COPY line. The driver then commits the micro-batch in
ONE transaction of its own (``commit_table`` per table, the worker's state,
``drop_stages``): TRUNCATE when a task read one, rows placed before the last
TRUNCATE ignored; keyed: every staged key deleted from the copy, then each
key's change with the greatest place across the tasks inserted unless it
deleted the key (one sort of the stages, in memory: ``SORT_MEMORY``);
unkeyed: the sum of each row's signs, removed or added as a multiset
difference (a row the copy lacks is an error naming the table: the copy
diverged). Staging tables are named
``<prefix><task>_<n>``, the prefix naming set and micro-batch, so whatever a
crash leaves is found by its prefix and dropped.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from psycopg2 import sql
from psycopg2.extensions import connection as Connection
from psycopg2.extensions import cursor as Cursor

from pgshovel.errors import StreamError
from pgshovel.replication.staging.reduce import Place, StagedTable
from pgshovel.source import TableShape, connect, translating

__all__ = [
    "PostgresStageSink",
    "Stage",
    "commit_table",
    "drop_stages",
    "leftover_stages",
    "stage_prefix",
    "write_stages",
]

SCHEMA = "pgshovel_replication"
PLACE_COLUMNS = ("pgshovel ordinal", "pgshovel event")
DELETED = "pgshovel deleted"
SIGN = "pgshovel sign"
LINE = "pgshovel line"


@dataclass(frozen=True)
class Stage:
    """What a task staged for one table: where, how many rows, and its last TRUNCATE."""

    schema: str
    table: str
    name: str
    rows: int
    keyed: bool
    truncated: Place | None


def stage_prefix(cluster: str, set_name: str, micro_batch: str = "") -> str:
    """The name prefix of a micro-batch's staging tables (``micro_batch`` a short id; empty:
    the prefix of every micro-batch of the set). Short enough for PostgreSQL's 63-byte names
    whatever the cluster's and set's names."""
    digest = hashlib.blake2b(f"{cluster}\x00{set_name}".encode(), digest_size=5).hexdigest()
    return f"stage {digest} {micro_batch} " if micro_batch else f"stage {digest} "


def _target(table: TableShape) -> sql.Composable:
    return sql.Identifier(table.schema, table.name)


def _columns(names: Sequence[str], alias: str | None = None) -> sql.Composable:
    if alias is None:
        return sql.SQL(", ").join(sql.Identifier(name) for name in names)
    return sql.SQL(", ").join(sql.Identifier(alias, name) for name in names)


def _stage_keyed(cursor: Cursor, name: str, staged: StagedTable) -> int:
    shape = staged.shape
    stage = sql.Identifier(SCHEMA, name)
    cursor.execute(
        sql.SQL(
            "CREATE UNLOGGED TABLE {} AS SELECT {}, NULL::integer AS {}, NULL::bigint AS {}, "
            "NULL::boolean AS {} FROM {} WITH NO DATA"
        ).format(
            stage,
            _columns(shape.column_names),
            *(sql.Identifier(column) for column in (*PLACE_COLUMNS, DELETED)),
            _target(shape),
        )
    )
    lines = [
        f"{staged.deleted_line(key) if deleted else line}\t{ordinal}\t{event}\t"
        f"{'t' if deleted else 'f'}\n".encode()
        for key, ((ordinal, event), deleted, line) in staged.rows.items()
    ]
    lines.extend(staged.copy.values())
    # FREEZE: the table is new in this transaction; the commit's scan sets no hint bits.
    copy = sql.SQL("COPY {} FROM STDIN (FREEZE)").format(stage)
    cursor.copy_expert(copy.as_string(cursor), io.BytesIO(b"".join(lines)))
    return len(lines)


def _stage_unkeyed(cursor: Cursor, name: str, staged: StagedTable) -> int:
    stage = sql.Identifier(SCHEMA, name)
    cursor.execute(
        sql.SQL("CREATE UNLOGGED TABLE {} ({} integer, {} bigint, {} integer, {} text)").format(
            stage, *(sql.Identifier(column) for column in (*PLACE_COLUMNS, SIGN, LINE))
        )
    )
    lines = [
        f"{ordinal}\t{event}\t{sign}\t{_escaped(line)}\n"
        for (ordinal, event), sign, line in staged.signed
    ]
    copy = sql.SQL("COPY {} FROM STDIN").format(stage)
    cursor.copy_expert(copy.as_string(cursor), io.StringIO("".join(lines)))
    return len(lines)


def _escaped(line: str) -> str:
    """A COPY line as the text of one COPY field (its backslashes and tabs escaped)."""
    return line.replace("\\", "\\\\").replace("\t", "\\t")


def write_stages(
    connection: Connection, prefix: str, task: int | str, staged: dict[tuple[str, str], StagedTable]
) -> list[Stage]:
    """Stage a task's tables and commit; return what was staged."""
    stages: list[Stage] = []
    with connection.cursor() as cursor:
        for number, table in enumerate(staged.values()):
            name = f"{prefix}{task}_{number}"
            keyed = bool(table.shape.key)
            rows = (_stage_keyed if keyed else _stage_unkeyed)(cursor, name, table)
            stages.append(
                Stage(table.shape.schema, table.shape.name, name, rows, keyed, table.truncated)
            )
    connection.commit()
    return stages


def _after(truncated: Place | None) -> sql.Composable:
    if truncated is None:
        return sql.SQL("true")
    return sql.SQL("({}, {}) > ({}, {})").format(
        *(sql.Identifier(column) for column in PLACE_COLUMNS),
        sql.Literal(truncated[0]),
        sql.Literal(truncated[1]),
    )


def _union(stages: Sequence[Stage], columns: sql.Composable) -> sql.Composable:
    return sql.SQL(" UNION ALL ").join(
        sql.SQL("SELECT {} FROM {}").format(columns, sql.Identifier(SCHEMA, stage.name))
        for stage in stages
    )


def commit_table(cursor: Cursor, table: TableShape, stages: Sequence[Stage]) -> int:
    """Apply one table's staged net effect inside the caller's transaction; return the rows
    written or removed."""
    places = [stage.truncated for stage in stages if stage.truncated is not None]
    truncated = max(places) if places else None
    if truncated is not None:
        cursor.execute(sql.SQL("TRUNCATE {}").format(_target(table)))
    if table.key:
        return _commit_keyed(cursor, table, stages, truncated)
    return _commit_unkeyed(cursor, table, stages, truncated)


#: the memory the commit's sort of the staged rows may use (``work_mem``, for its transaction
#: only, when the server's is lower): a micro-batch's net effect sorts in memory, not on disk
SORT_MEMORY = 256 << 20


def _sort_memory(cursor: Cursor) -> None:
    cursor.execute(
        "SELECT set_config('work_mem', %s, true) "
        "WHERE pg_size_bytes(current_setting('work_mem')) < %s",
        (f"{SORT_MEMORY >> 10}kB", SORT_MEMORY),
    )


def _commit_keyed(
    cursor: Cursor, table: TableShape, stages: Sequence[Stage], truncated: Place | None
) -> int:
    names = table.column_names
    key, deleted = _columns(table.key), sql.Identifier(DELETED)
    _sort_memory(cursor)
    removed = 0
    if truncated is None:  # after a TRUNCATE here the copy holds no row to remove
        match = sql.SQL(" AND ").join(
            sql.SQL("{} = {}").format(sql.Identifier("t", name), sql.Identifier("s", name))
            for name in table.key
        )
        cursor.execute(
            sql.SQL("DELETE FROM {} AS t USING ({}) AS s WHERE {}").format(
                _target(table), _union(stages, key), match
            )
        )
        removed = max(cursor.rowcount, 0)
    every = sql.SQL(", ").join(
        [_columns(names), *(sql.Identifier(column) for column in (*PLACE_COLUMNS, DELETED))]
    )
    # Each key's last change across the tasks, written unless it deleted the key (no
    # temporary table). One task's stage holds a row per key already (its reduce kept each
    # key's last change): no sort.
    distinct: sql.Composable = sql.SQL("")
    last: sql.Composable = sql.SQL("")
    if len(stages) > 1:
        distinct = sql.SQL("DISTINCT ON ({}) ").format(key)
        last = sql.SQL(" ORDER BY {}, {} DESC, {} DESC").format(
            key, *(sql.Identifier(column) for column in PLACE_COLUMNS)
        )
    cursor.execute(
        sql.SQL(
            "INSERT INTO {target} ({columns}) SELECT {columns} FROM (SELECT {distinct}"
            "{columns}, {deleted} FROM ({union}) AS staged WHERE {after}{last}) AS net "
            "WHERE NOT {deleted}"
        ).format(
            target=_target(table),
            columns=_columns(names),
            distinct=distinct,
            deleted=deleted,
            union=_union(stages, every),
            after=_after(truncated),
            last=last,
        )
    )
    return removed + max(cursor.rowcount, 0)


def _commit_unkeyed(
    cursor: Cursor, table: TableShape, stages: Sequence[Stage], truncated: Place | None
) -> int:
    line, sign = sql.Identifier(LINE), sql.Identifier(SIGN)
    every = sql.SQL(", ").join(sql.Identifier(column) for column in (*PLACE_COLUMNS, SIGN, LINE))
    cursor.execute(
        sql.SQL(
            "SELECT {line}, sum({sign})::bigint FROM ({union}) AS staged WHERE {after} "
            "GROUP BY {line} HAVING sum({sign}) <> 0"
        ).format(line=line, sign=sign, union=_union(stages, every), after=_after(truncated))
    )
    net: list[tuple[str, int]] = cursor.fetchall()
    names = table.column_names
    added = [row + "\n" for row, count in net if count > 0 for _ in range(count)]
    removed = [f"{row}\t{-count}\n" for row, count in net if count < 0]
    if removed:
        _remove(cursor, table, removed)
    if added:
        copy = sql.SQL("COPY {} ({}) FROM STDIN").format(_target(table), _columns(names))
        cursor.copy_expert(copy.as_string(cursor), io.StringIO("".join(added)))
    return len(added) + sum(-count for _row, count in net if count < 0)


def _remove(cursor: Cursor, table: TableShape, removed: list[str]) -> None:
    """Remove each row of ``removed`` (a COPY line and how many of it) from the copy."""
    names = table.column_names
    doomed = sql.Identifier("pgshovel removed")
    count = sql.Identifier(SIGN)
    cursor.execute(
        sql.SQL(
            "CREATE TEMPORARY TABLE {} ON COMMIT DROP AS SELECT {} FROM {} WITH NO DATA"
        ).format(doomed, _columns(names), _target(table))
    )
    cursor.execute(sql.SQL("ALTER TABLE {} ADD COLUMN {} integer").format(doomed, count))
    copy = sql.SQL("COPY {} FROM STDIN").format(doomed)
    cursor.copy_expert(copy.as_string(cursor), io.StringIO("".join(removed)))
    cursor.execute(
        sql.SQL(
            "WITH wanted AS (SELECT ROW({d_columns})::text AS r, {count} AS n FROM {doomed} AS d), "
            "found AS (SELECT t.ctid AS c, ROW({t_columns})::text AS r, row_number() OVER "
            "(PARTITION BY ROW({t_columns})::text) AS k FROM {target} AS t "
            "WHERE ROW({t_columns})::text IN (SELECT r FROM wanted)) "
            "DELETE FROM {target} WHERE ctid IN (SELECT f.c FROM found AS f JOIN wanted AS w "
            "ON f.r = w.r WHERE f.k <= w.n)"
        ).format(
            d_columns=_columns(names, "d"),
            t_columns=_columns(names, "t"),
            count=count,
            doomed=doomed,
            target=_target(table),
        )
    )
    wanted = sum(int(line.rsplit("\t", 1)[1]) for line in removed)
    if cursor.rowcount != wanted:
        raise StreamError(
            f"the copy of {table.qualified!r} lacks {wanted - cursor.rowcount!r} of the "
            f"{wanted!r} row(s) the source removed in this micro-batch: the copy diverged from "
            "the source; run pgshovel-admin set verify --repair (or set resnapshot) for it"
        )
    cursor.execute(sql.SQL("DROP TABLE {}").format(doomed))


def leftover_stages(cursor: Cursor, prefix: str) -> list[str]:
    """Staging tables whose name starts with ``prefix`` (a crash's leftovers)."""
    cursor.execute(
        "SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r' "
        "AND left(c.relname, length(%s)) = %s",
        (SCHEMA, prefix, prefix),
    )
    return [str(row[0]) for row in cursor.fetchall()]


def drop_stages(cursor: Cursor, names: Sequence[str]) -> None:
    """Drop staging tables by name (inside the caller's transaction)."""
    for name in names:
        cursor.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(SCHEMA, name)))


@dataclass(frozen=True)
class PostgresStageSink:
    """Stages a task's tables in the target (``StageSink``; pickles into Spark tasks): each
    attempt of a task under its own names, ``<prefix><task>a<attempt>_<n>``."""

    dsn: str
    prefix: str
    #: tasks reduce keyed tables straight to the stage's COPY lines (``reduce_messages``)
    copy: ClassVar[bool] = True

    def stage(
        self, task: int, attempt: int, staged: dict[tuple[str, str], StagedTable]
    ) -> list[Stage]:
        connection = connect(self.dsn, "pgshovel-replicate stage")
        try:
            with translating(f"staging task {task!r} of a micro-batch"):
                return write_stages(connection, self.prefix, f"{task}a{attempt}", staged)
        finally:
            connection.close()
