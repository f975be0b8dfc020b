"""Consumers that drain a capture while pgbench writes: a PgQ consumer thread, pg_recvlogical.

Capture is only half of a change-data-capture system's cost on the source: its
consumer reads there too. :func:`pgq_drain` runs a thread that does what a PgQ
consumer with its own ticker does (``pgq.ticker``, ``pgq.next_batch``, every
event of the batch fetched, ``pgq.finish_batch``), without pause while batches
come and every 50 ms otherwise. :func:`logical_drain` runs ``pg_recvlogical``
on a replication slot, writing what it decodes to ``/dev/null``. Both stop
when their ``with`` block ends, on errors too (the process by its PID), and
raise if the consumer failed while it ran.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import connection

from pgshovel.cluster import names
from pgshovel.sandbox import ChildProcess

logger = logging.getLogger(__name__)

#: How long the PgQ consumer sleeps when there was no batch to read.
INTERVAL = 0.05
#: How long a consumer may take to start or to stop.
TIMEOUT = 30.0


def _bindir() -> Path:
    return Path(os.environ.get("PGSHOVEL_POSTGRES_BINDIR", "/usr/lib/postgresql/15/bin"))


class PgqConsumer:
    """The thread behind :func:`pgq_drain`; ``events`` counts what it read."""

    def __init__(self, conn: connection, queue: str) -> None:
        self.conn = conn
        self.queue = queue
        self.events = 0
        self.batches = 0
        self.error: Exception | None = None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"drain {queue}")

    def _run(self) -> None:
        try:
            while not self.stopping.is_set():
                if not self._one_batch():
                    self.stopping.wait(INTERVAL)
        except Exception as error:  # reported by pgq_drain when the block ends
            self.error = error
            with contextlib.suppress(psycopg2.Error):
                self.conn.rollback()

    def _one_batch(self) -> bool:
        """Tick, then read and finish the next batch; False when there was none."""
        with self.conn.cursor() as cursor:
            cursor.execute("SELECT pgq.ticker(%s)", (self.queue,))
            self.conn.commit()
            cursor.execute("SELECT pgq.next_batch(%s, %s)", (self.queue, names.CONSUMER))
            row = cursor.fetchone()
            batch = None if row is None else row[0]
            if batch is None:
                self.conn.commit()
                return False
            cursor.execute("SELECT * FROM pgq.get_batch_events(%s)", (batch,))
            self.events += len(cursor.fetchall())
            cursor.execute("SELECT pgq.finish_batch(%s)", (batch,))
            self.conn.commit()
        self.batches += 1
        return True


@contextmanager
def pgq_drain(dsn: str, queue: str) -> Iterator[PgqConsumer]:
    """A consumer of ``queue`` (registered as pgshovel's relay is) reading it in a thread."""
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cursor:
            cursor.execute("SELECT pgq.register_consumer(%s, %s)", (queue, names.CONSUMER))
        conn.commit()
        consumer = PgqConsumer(conn, queue)
        consumer.thread.start()
        try:
            yield consumer
        finally:
            consumer.stopping.set()
            consumer.thread.join(TIMEOUT)
            if consumer.thread.is_alive():
                # Its connection is closed below: the thread's next call fails and it ends.
                logger.warning("the consumer of %s did not stop within %.0fs", queue, TIMEOUT)
        if consumer.error is not None:
            raise RuntimeError(
                f"the consumer of {queue!r} failed after {consumer.events!r} events: "
                f"{consumer.error}"
            ) from consumer.error
        logger.info(
            "the consumer read %d events of %s in %d batches",
            consumer.events,
            queue,
            consumer.batches,
        )
    finally:
        conn.close()


def allow_output_plugin(conn: connection, database: str, plugin: str) -> None:
    """Let ``database``'s sessions (and ``conn``'s) decode with ``plugin``.

    Recent PostgreSQL minor releases only load the output plugins that
    ``output_plugin_libraries`` names (by default pgoutput and test_decoding),
    for slot creation and for ``START_REPLICATION`` alike. The bench adds its
    plugin for its scratch database only, which it drops afterwards; a server
    without that setting lets any plugin be used.
    """
    with conn.cursor() as cursor:
        cursor.execute("SELECT setting FROM pg_settings WHERE name = 'output_plugin_libraries'")
        row = cursor.fetchone()
        if row is None:
            return
        libraries = [name.strip().strip('"') for name in str(row[0]).split(",")]
        if plugin in libraries:
            return
        allowed = sql.SQL(", ").join(sql.Literal(name) for name in [*libraries, plugin] if name)
        cursor.execute(
            sql.SQL("ALTER DATABASE {} SET output_plugin_libraries = {}").format(
                sql.Identifier(database), allowed
            )
        )
        cursor.execute(sql.SQL("SET output_plugin_libraries = {}").format(allowed))


def _slot_active(conn: connection, slot: str) -> bool | None:
    """Whether a process streams from ``slot`` (None: there is no such slot)."""
    with conn.cursor() as cursor:
        cursor.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,))
        row = cursor.fetchone()
    return None if row is None else bool(row[0])


def _behind(conn: connection, slot: str) -> int | None:
    """How far the WAL sent to ``slot``'s receiver is behind the WAL written so far."""
    with conn.cursor() as cursor:
        cursor.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), r.sent_lsn) FROM pg_stat_replication r"
            " JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = %s",
            (slot,),
        )
        row = cursor.fetchone()
    return None if row is None or row[0] is None else int(row[0])


def drop_slot(conn: connection, slot: str) -> None:
    """Drop ``slot`` if it exists, once nothing streams from it (``conn``: autocommit)."""
    deadline = time.monotonic() + TIMEOUT
    while _slot_active(conn, slot):
        if time.monotonic() > deadline:
            raise RuntimeError(f"replication slot {slot!r} is still in use after {TIMEOUT:.0f}s")
        time.sleep(0.05)
    with conn.cursor() as cursor:
        cursor.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
            " WHERE slot_name = %s",
            (slot,),
        )


@contextmanager
def logical_drain(conn: connection, dsn: str, slot: str, plugin: str, log: Path) -> Iterator[None]:
    """A logical replication ``slot`` (on ``dsn``'s database) that ``pg_recvlogical`` streams
    to /dev/null while the block runs; the slot is dropped afterwards. ``conn``: autocommit,
    same database."""
    with conn.cursor() as cursor:
        cursor.execute("SELECT pg_create_logical_replication_slot(%s, %s)", (slot, plugin))
    try:
        command = [
            str(_bindir() / "pg_recvlogical"),
            "--dbname",
            dsn,
            "--slot",
            slot,
            "--start",
            "--no-loop",
            "--file",
            os.devnull,
        ]
        receiver = ChildProcess.start("pg_recvlogical", command, log)
        try:
            deadline = time.monotonic() + TIMEOUT
            while not _slot_active(conn, slot):
                if not receiver.running() or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"pg_recvlogical did not start streaming from {slot!r} "
                        f"(exit status {receiver.returncode!r}): {receiver.log_tail()}"
                    )
                time.sleep(0.02)
            yield
            behind = _behind(conn, slot)
            logger.info("pg_recvlogical was %s bytes of WAL behind when the block ended", behind)
            if not receiver.running():
                raise RuntimeError(
                    f"pg_recvlogical stopped streaming from {slot!r} while pgbench ran "
                    f"(exit status {receiver.returncode!r}): {receiver.log_tail()}"
                )
        finally:
            receiver.stop(TIMEOUT)
    finally:
        drop_slot(conn, slot)
