"""``wait_applied`` sleeps on the worker's wake-up lock and wakes at its commits (no polling).

A real PostgreSQL target opened by ``PostgresTarget`` (the worker's own code
path, without Spark or Kafka): its commits of the state row are what wakes the
waiters. What the waiting backend is doing is read from ``pg_stat_activity``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg2
import pytest

from pgshovel.replication.targets import _pgstate, _pgwake
from pgshovel.replication.targets.postgresql import PostgresTarget
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.state import WorkerState

pytestmark = pytest.mark.integration

CLUSTER, SET = "wake", "set"

#: a txid snapshot in which txid 1000 is not visible yet, and one in which it is
BEFORE, AFTER = "900:900:", "1001:1001:"


def applied_state() -> WorkerState:
    """The state a worker stores once the batch holding txid 1000 is applied."""
    return WorkerState(
        phase="streaming", snapshot=BEFORE, position=StreamPosition.start((0,)), horizon=AFTER
    )


@pytest.fixture
def target(database: str) -> Iterator[PostgresTarget]:
    opened = PostgresTarget(database)
    opened.open(CLUSTER, SET)
    opened.store_state(
        WorkerState(phase="streaming", snapshot=BEFORE, position=StreamPosition.start((0,)))
    )
    yield opened
    opened.close()


def one(cursor: Any) -> Any:
    """The one value of a query's one row."""
    row = cursor.fetchone()
    assert row is not None, "the query returned no row"
    return row[0]


class Waiter(threading.Thread):
    """``wait_applied(1000, timeout)`` in its own session; notes its result and when it came."""

    def __init__(self, dsn: str, timeout: str) -> None:
        super().__init__(daemon=True)
        self.connection = psycopg2.connect(dsn)
        self.connection.autocommit = True
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            self.pid = one(cursor)
        self.timeout = timeout
        self.result: bool | None = None
        self.returned = 0.0

    def run(self) -> None:
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT pgshovel_replication.wait_applied(1000, %s)", (self.timeout,))
            self.result = one(cursor)
        self.returned = time.monotonic()
        self.connection.close()


def waits(dsn: str, pid: int, samples: int = 40, interval: float = 0.025) -> list[str]:
    """What the backend ``pid`` waits on, sampled ``samples`` times."""
    seen = []
    with psycopg2.connect(dsn) as connection:
        connection.autocommit = True
        with connection.cursor() as cursor:
            for _ in range(samples):
                cursor.execute(
                    "SELECT coalesce(wait_event_type || '/' || wait_event, state) "
                    "FROM pg_stat_activity WHERE pid = %s",
                    (pid,),
                )
                row = cursor.fetchone()
                seen.append(row[0] if row else "gone")
                time.sleep(interval)
    connection.close()
    return seen


def test_a_waiter_sleeps_on_the_lock_and_wakes_at_the_commit(
    database: str, target: PostgresTarget
) -> None:
    waiter = Waiter(database, "20 seconds")
    waiter.start()
    seen = waits(database, waiter.pid)
    asleep = seen.count("Lock/advisory")
    # Each check between two sleeps takes microseconds: a polling waiter would be seen in
    # PgSleep or running most of the time.
    assert asleep >= 0.8 * len(seen), seen
    assert waiter.is_alive()

    committed = time.monotonic()
    target.store_state(applied_state())
    waiter.join(10)
    assert waiter.result is True
    # Woken by the hand-over right after the commit (the longest sleep is 0.1 s).
    assert waiter.returned - committed < 0.09, waiter.returned - committed


def test_without_a_worker_waiters_poll_and_still_see_the_commit(
    database: str, target: PostgresTarget
) -> None:
    target.close()  # the worker's session ends, and its wake-up lock with it
    waiter = Waiter(database, "20 seconds")
    waiter.start()
    seen = waits(database, waiter.pid, samples=20)
    assert "Lock/advisory" not in seen, seen
    assert seen.count("Timeout/PgSleep") >= 0.5 * len(seen), seen
    with psycopg2.connect(database) as connection, connection.cursor() as cursor:
        stored = _pgstate.read(cursor, CLUSTER, SET)
        assert stored is not None
        _pgstate.write(cursor, CLUSTER, SET, stored.replace(horizon=AFTER))
    connection.close()
    waiter.join(10)
    assert waiter.result is True


def test_a_timeout_still_returns_false_while_the_worker_holds_the_lock(
    database: str, target: PostgresTarget
) -> None:
    started = time.monotonic()
    waiter = Waiter(database, "300 milliseconds")
    waiter.run()
    assert waiter.result is False
    assert 0.3 <= waiter.returned - started < 2.0
    # The caller's own lock_timeout is what it was.
    with psycopg2.connect(database) as connection, connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '7s'")
        cursor.execute("SELECT pgshovel_replication.wait_applied(1000, '50 milliseconds')")
        cursor.execute("SHOW lock_timeout")
        assert one(cursor) == "7s"
    connection.close()


def test_a_session_keeping_the_lock_delays_the_worker_once_then_waiters_poll(
    database: str, target: PostgresTarget, caplog: pytest.LogCaptureFixture
) -> None:
    # A session that gets the lock in shared mode at a hand-over and never lets go (as one
    # cancelled between its two calls would).
    stuck = psycopg2.connect(database)
    stuck.autocommit = True

    def take_and_keep() -> None:
        with stuck.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_lock_shared(hashtext(%s), hashtext(%s))",
                (_pgwake.BATON_CLASS, _pgwake.baton_name(CLUSTER, SET)),
            )

    keeper = threading.Thread(target=take_and_keep, daemon=True)
    keeper.start()
    assert "Lock/advisory" in waits(database, stuck.get_backend_pid(), samples=20)
    with caplog.at_level(logging.WARNING):
        started = time.monotonic()
        target.store_state(
            WorkerState(phase="streaming", snapshot=BEFORE, position=StreamPosition.start((0,)))
        )
        # The worker went on without it after its lock_timeout.
        assert 0.9 <= time.monotonic() - started < 5
    keeper.join(5)
    assert not keeper.is_alive()
    assert "kept the wake-up lock" in caplog.text
    stuck.close()

    # The next commit takes it back, and waiters sleep on it again.
    target.store_state(
        WorkerState(phase="streaming", snapshot=BEFORE, position=StreamPosition.start((0,)))
    )
    waiter = Waiter(database, "20 seconds")
    waiter.start()
    seen = waits(database, waiter.pid, samples=12)
    assert seen.count("Lock/advisory") >= 8, seen
    target.store_state(applied_state())
    waiter.join(10)
    assert waiter.result is True
