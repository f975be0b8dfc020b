"""A target's stored worker state, read the way the product reads it (one place for tests).

Tests never read ``pgshovel_replication.worker_state`` columns or a Parquet
``_state.json`` themselves: the shape of the stored state is the targets'
business (``_pgstate.read``, ``parquet.stored_state``).
"""

from __future__ import annotations

from pathlib import Path

from psycopg2 import sql

from pgshovel.replication.targets import _pgstate, parquet
from pgshovel.source import connect
from pgshovel.stream.state import WorkerState


def postgres_state(dsn: str, cluster: str, set_name: str) -> WorkerState | None:
    """The state a PostgreSQL target stores for (cluster, set), None if none yet."""
    connection = connect(dsn, "pgshovel-tests")
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT to_regclass(%s) IS NOT NULL",
                (f"{_pgstate.STATE_SCHEMA}.{_pgstate.STATE_TABLE}",),
            )
            row = cursor.fetchone()
            if row is None or not row[0]:
                return None
            return _pgstate.read(cursor, cluster, set_name)
    finally:
        connection.rollback()
        connection.close()


def sole_postgres_state(dsn: str) -> WorkerState | None:
    """The state of the one set a PostgreSQL target holds, None if none yet."""
    connection = connect(dsn, "pgshovel-tests")
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT to_regclass(%s) IS NOT NULL",
                (f"{_pgstate.STATE_SCHEMA}.{_pgstate.STATE_TABLE}",),
            )
            row = cursor.fetchone()
            if row is None or not row[0]:
                return None
            cursor.execute(
                sql.SQL("SELECT cluster, set_name FROM {}").format(
                    sql.Identifier(_pgstate.STATE_SCHEMA, _pgstate.STATE_TABLE)
                )
            )
            names = cursor.fetchall()
            assert len(names) <= 1, f"the target holds the state of several sets: {names!r}"
            return _pgstate.read(cursor, *names[0]) if names else None
    finally:
        connection.rollback()
        connection.close()


def parquet_state(path: Path | str) -> WorkerState | None:
    """The state a Parquet target's state file commits, None if none yet."""
    return parquet.stored_state(str(path))


def applied_offset(state: WorkerState | None) -> int | None:
    """The offset of the last message applied (one partition), None before the first batch:
    what 0.2 stored as ``position_offset``."""
    if state is None or not state.position.consumed:
        return None
    return state.position.cursor(0).next_offset - 1


def phase_and_offset(state: WorkerState | None) -> tuple[str, int | None] | None:
    """(phase, offset of the last message applied), None without a state."""
    return None if state is None else (state.phase, applied_offset(state))


def table_format_state(root: Path | str, cluster: str, set_name: str) -> WorkerState | None:
    """The state a Delta or Iceberg target stores for (cluster, set), None if none yet."""
    from pgshovel.replication.targets._tablefmt_log import TargetFiles

    stored = TargetFiles(Path(root), cluster, set_name).read_state()
    return None if stored is None else stored[1]
