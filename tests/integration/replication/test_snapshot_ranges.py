"""A snapshot range that Spark runs again is loaded once into the PostgreSQL target.

Spark retries a task whose executor was lost, and the lost attempt may have
committed its range already (it died before reporting), or may still be
committing it while the retry starts. The sink is called here exactly as
tasks call it, once per attempt, on the real target database.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import IO

import pytest

from pgshovel.errors import DatabaseError
from pgshovel.replication.targets.postgresql import PostgresTarget
from pgshovel.source import Column, KeyRange, TableShape, connect
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.state import WorkerState

pytestmark = pytest.mark.integration

ROWS = [b"1\tone\n", b"2\ttwo\n", b"3\tthree\n"]


def shape(keyed: bool) -> TableShape:
    columns = (Column("id", "bigint", "int8", not_null=keyed), Column("body", "text", "text"))
    return TableShape("public", "ranged", columns, ("id",) if keyed else ())


@pytest.fixture
def target(database: str) -> Iterator[PostgresTarget]:
    opened = PostgresTarget(database)
    opened.open("test", "set")
    yield opened
    opened.close()


def begin(target: PostgresTarget, table: TableShape) -> WorkerState:
    state = WorkerState(
        phase="snapshot", snapshot="1:1:", position=StreamPosition.start((0,)), tables=(table,)
    )
    target.begin_snapshot(state)
    return state


def copy_rows(out: IO[bytes]) -> None:
    out.writelines(ROWS)


def table_rows(dsn: str) -> list[tuple[object, ...]]:
    connection = connect(dsn, "pgshovel-tests")
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT id, body FROM public.ranged ORDER BY id")
            return list(cursor.fetchall())
    finally:
        connection.close()


EXPECTED = [(1, "one"), (2, "two"), (3, "three")]


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed"])
def test_a_range_run_again_after_its_commit_copies_nothing(
    target: PostgresTarget, database: str, keyed: bool
) -> None:
    table = shape(keyed)
    state = begin(target, table)
    sink = target.snapshot_sink()
    key_range = KeyRange(table=table, index=0, lower=None, upper=None)

    assert sink.load_range(key_range, copy_rows) == 3
    # The retry of an attempt that committed, then died before Spark heard of it.
    assert sink.load_range(key_range, copy_rows) == 3
    assert table_rows(database) == EXPECTED

    target.finish_snapshot(state)
    # A later load (a new snapshot after a restart) loads the range again.
    begin(target, table)
    assert sink.load_range(key_range, copy_rows) == 3
    assert table_rows(database) == EXPECTED


@pytest.mark.parametrize("first_commits", [True, False], ids=["first-commits", "first-fails"])
def test_a_retry_waits_for_the_attempt_still_open_then_skips_or_loads(
    target: PostgresTarget, database: str, first_commits: bool
) -> None:
    table = shape(keyed=False)  # nothing but the range record keeps an unkeyed table exact
    begin(target, table)
    sink = target.snapshot_sink()
    key_range = KeyRange(table=table, index=0, lower=None, upper=None)
    release = threading.Event()
    results: dict[str, object] = {}

    def first_copy(out: IO[bytes]) -> None:
        out.writelines(ROWS[:2])
        out.flush()
        release.wait(120)
        if not first_commits:
            raise OSError("the executor died mid-range")
        out.write(ROWS[2])

    def attempt(name: str, copy: object) -> None:
        try:
            results[name] = sink.load_range(key_range, copy)  # type: ignore[arg-type]
        except DatabaseError as error:
            results[name] = error

    first = threading.Thread(target=attempt, args=("first", first_copy))
    first.start()
    wait_for_copy(database)
    second = threading.Thread(target=attempt, args=("second", copy_rows))
    second.start()
    wait_for_lock_wait(database)
    assert "second" not in results, "the retry must wait while the first attempt is open"
    release.set()
    first.join(120)
    second.join(120)

    assert results["second"] == 3
    if first_commits:
        assert results["first"] == 3
    else:
        assert isinstance(results["first"], DatabaseError), results["first"]
    assert table_rows(database) == EXPECTED


def _snapshot_sessions(dsn: str, query: str, parameter: str) -> bool:
    """Whether a session of the sink on this database matches ``query`` (see below)."""
    connection = connect(dsn, "pgshovel-tests")
    try:
        with connection.cursor() as cursor:
            cursor.execute(query, (parameter,))
            row = cursor.fetchone()
        connection.rollback()
    finally:
        connection.close()
    return bool(row and row[0])


_COPYING = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    "AND application_name = 'pgshovel-replicate snapshot' AND query LIKE %s"
)
_WAITING = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    "AND application_name = 'pgshovel-replicate snapshot' AND wait_event_type = %s"
)


def _wait(dsn: str, query: str, parameter: str, what: str) -> None:
    deadline = time.monotonic() + 120
    while not _snapshot_sessions(dsn, query, parameter):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def wait_for_copy(dsn: str) -> None:
    _wait(dsn, _COPYING, "COPY%", "the first attempt's COPY")


def wait_for_lock_wait(dsn: str) -> None:
    _wait(dsn, _WAITING, "Lock", "the retry to wait for the first attempt")
