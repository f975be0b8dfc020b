"""Waking ``wait_applied`` callers at the worker's commits: a lock handed over after each one.

The worker holds a session-level advisory lock per (cluster, set) — the *baton*
— for as long as it runs, and after each commit releases it and takes it again.
A ``wait_applied`` caller whose transaction is not applied yet blocks on the
baton in shared mode (``pg_advisory_lock_shared``, bounded by ``lock_timeout``):
the worker's release grants it at once, it lets go, and checks the state row
again in a new snapshot, which holds the commit just made. PostgreSQL queues a
new shared request behind the worker's waiting exclusive one, so the worker
always gets the baton back and a waiter sleeps until the next commit: no
polling while a worker runs. Without a worker (the baton is free) waiters poll
the state row every ``IDLE_POLL`` instead.

The worker takes the baton back with a ``lock_timeout``: a waiter's session
that keeps the shared lock (cancelled between its two calls) costs the worker
at most that long once, then the worker runs without the baton (waiters poll)
and tries again after its next commit.
"""

from __future__ import annotations

import logging

import psycopg2.errors
from psycopg2 import sql
from psycopg2.extensions import connection as Connection

logger = logging.getLogger(__name__)

#: The first half of every baton's advisory lock key (the second: the (cluster, set) name).
BATON_CLASS = "pgshovel_replication wake"

#: How long the worker waits to take the baton back from waiters before going on without it.
TAKE_TIMEOUT = "1s"


def baton_name(cluster: str, set_name: str) -> str:
    """The second half of a set's baton key, as ``wait_applied`` computes it from the state row."""
    return f"{cluster}/{set_name}"


_KEY = sql.SQL("hashtext({}), hashtext(%s)").format(sql.Literal(BATON_CLASS))
_RELEASE = sql.SQL("SELECT pg_advisory_unlock({})").format(_KEY)
_TAKE = sql.SQL("SELECT set_config('lock_timeout', {}, true), pg_advisory_lock({}) IS NULL").format(
    sql.Literal(TAKE_TIMEOUT), _KEY
)


class Baton:
    """The worker's side: take the baton when the target opens, hand it over after commits."""

    def __init__(self, cluster: str, set_name: str) -> None:
        self.name = baton_name(cluster, set_name)
        self.held = False

    def hand_over(self, connection: Connection) -> None:
        """Release the baton (waking the waiters) and take it back; the connection must be
        outside a transaction (just committed). Takes it the first time."""
        try:
            with connection.cursor() as cursor:
                if self.held:
                    cursor.execute(_RELEASE, (self.name,))
                    self.held = False
                cursor.execute(_TAKE, (self.name,))
            connection.commit()
            self.held = True
        except psycopg2.errors.LockNotAvailable:
            connection.rollback()
            logger.warning(
                "a wait_applied session kept the wake-up lock of %s for %s; waiters poll until "
                "the worker takes it back after its next commit",
                self.name,
                TAKE_TIMEOUT,
            )
