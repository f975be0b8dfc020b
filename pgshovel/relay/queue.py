"""The PgQ side of the relay: ticking, taking a batch, streaming its events, finishing it.

Transaction discipline (why each step commits where it does):

1. ``tick()`` runs ``pgq.ticker(queue)`` on an autocommit connection: a tick is
   only useful once committed.
2. ``next_batch()`` takes the next batch and commits at once, so the batch
   assignment is durable: after a crash the same batch id comes back with the
   same events, and readers can recognise the re-send.
3. ``events()`` streams the batch's rows through a server-side cursor, packed
   rows expanded into their events (``pgshovel.relay.packing``).
4. ``finish()`` runs ``pgq.finish_batch`` and commits; the relay calls it only
   after Kafka acknowledged every message of the batch.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg2
import psycopg2.extensions
from psycopg2 import sql

from pgshovel.abc import BatchInfo, EventRow, TickInfo
from pgshovel.cluster import names
from pgshovel.errors import ConfigurationError
from pgshovel.relay.packing import events_in, unpacked
from pgshovel.source import connect, translating

CONSUMER = names.CONSUMER
APPLICATION_NAME = "pgshovel-relay"
#: rows of a batch's first fetch: packed rows hold many events each, so the fetches that
#: follow take as many rows as hold about ``fetch_size`` events
FIRST_FETCH = 64


def application_name(queue: str) -> str:
    """How a relay's sessions on ``queue`` name themselves (``set failover`` waits for them
    to leave the old primary); PostgreSQL keeps 63 bytes of it."""
    return f"{APPLICATION_NAME} {queue}"[:63]


class PgqQueue:
    """One set's PgQ queue, consumed as ``pgshovel`` (a ``QueueReader``)."""

    def __init__(self, dsn: str, queue: str, fetch_size: int = 5000) -> None:
        self.queue = queue
        self.fetch_size = fetch_size
        self._dsn = dsn
        self._ticker: psycopg2.extensions.connection | None = None
        self._batches: psycopg2.extensions.connection | None = None

    # -- connections -------------------------------------------------------

    @property
    def connection(self) -> psycopg2.extensions.connection:
        """The batch connection (transactional), opened on first use."""
        if self._batches is None or self._batches.closed:
            self._batches = connect(self._dsn, application_name(self.queue))
        return self._batches

    def _ticker_connection(self) -> psycopg2.extensions.connection:
        if self._ticker is None or self._ticker.closed:
            self._ticker = connect(self._dsn, application_name(self.queue), autocommit=True)
        return self._ticker

    def close(self) -> None:
        for connection in (self._ticker, self._batches):
            if connection is not None and not connection.closed:
                connection.close()
        self._ticker = self._batches = None

    # -- setup -------------------------------------------------------------

    def check(self) -> None:
        """Fail clearly when the queue or the consumer registration is missing."""
        with translating(f"checking queue {self.queue!r}"):
            with self._ticker_connection().cursor() as cursor:
                cursor.execute(
                    "SELECT 1 FROM pgq.get_consumer_info(%s, %s)", (self.queue, CONSUMER)
                )
                registered = cursor.fetchone() is not None
        if not registered:
            raise ConfigurationError(
                f"queue {self.queue!r} has no consumer {CONSUMER!r}; "
                "was the set created with pgshovel-admin set create?"
            )

    def configure_ticker(self, max_lag_seconds: float, max_count: int) -> None:
        """Make ``pgq.ticker`` tick once per interval whenever there are events."""
        lag = f"{max(max_lag_seconds, 0.0):.3f} seconds"
        with translating(f"configuring the ticker of {self.queue!r}"):
            with self._ticker_connection().cursor() as cursor:
                cursor.execute(
                    "SELECT pgq.set_queue_config(%s, 'ticker_max_lag', %s),"
                    " pgq.set_queue_config(%s, 'ticker_max_count', %s)",
                    (self.queue, lag, self.queue, str(max_count)),
                )

    # -- the loop ----------------------------------------------------------

    def tick(self) -> int | None:
        with translating(f"ticking {self.queue!r}"):
            with self._ticker_connection().cursor() as cursor:
                cursor.execute("SELECT pgq.ticker(%s)", (self.queue,))
                row = cursor.fetchone()
        return None if row is None else row[0]

    def next_batch(self) -> BatchInfo | None:
        """Take the next batch (the same one again if it was never finished)."""
        connection = self.connection
        try:
            with translating(f"taking the next batch of {self.queue!r}"):
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT batch_id, prev_tick_id, cur_tick_id "
                        "FROM pgq.next_batch_info(%s, %s)",
                        (self.queue, CONSUMER),
                    )
                    row = cursor.fetchone()
                    if row is None or row[0] is None:
                        connection.commit()
                        return None
                    batch_id, start_id, end_id = row
                    cursor.execute(
                        "SELECT t.tick_id, t.tick_snapshot::text,"
                        " (extract(epoch FROM t.tick_time) * 1000000)::int8, t.tick_event_seq"
                        " FROM pgq.tick t JOIN pgq.queue q ON q.queue_id = t.tick_queue"
                        " WHERE q.queue_name = %s AND t.tick_id IN (%s, %s)",
                        (self.queue, start_id, end_id),
                    )
                    ticks = {
                        tick_id: TickInfo(tick_id, snap, ts, seq)
                        for tick_id, snap, ts, seq in cursor
                    }
                connection.commit()
        except BaseException:
            self.abandon()
            raise
        missing = TickInfo(0, "", 0)
        return BatchInfo(batch_id, ticks.get(start_id, missing), ticks.get(end_id, missing))

    def events(self, batch: BatchInfo) -> Iterator[list[EventRow]]:
        """Yield the batch's events in chunks of about ``fetch_size``, in event order (packed
        rows expanded)."""
        connection = self.connection
        with translating(f"reading batch {batch.id} of {self.queue!r}"):
            with connection.cursor() as cursor:
                cursor.execute("SELECT pgq.batch_event_sql(%s)", (batch.id,))
                batch_sql = cursor.fetchone()[0]  # type: ignore[index]
            query = sql.SQL(
                "SELECT ev_id, (extract(epoch FROM ev_time) * 1000000)::int8, ev_txid, ev_type,"
                " ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4 FROM ({}) AS batch"
                " ORDER BY ev_id"
            ).format(sql.SQL(batch_sql))
            with connection.cursor(name=f"pgshovel_batch_{batch.id}") as cursor:
                cursor.itersize = self.fetch_size
                cursor.execute(query)
                yield from unpacked(self._fetched(cursor))

    def _fetched(self, cursor: psycopg2.extensions.cursor) -> Iterator[list[EventRow]]:
        """The cursor's rows in chunks holding about ``fetch_size`` events each."""
        rows = min(self.fetch_size, FIRST_FETCH)
        while True:
            chunk = cursor.fetchmany(rows)
            if not chunk:
                return
            yield chunk
            events = sum(map(events_in, chunk))
            rows = max(1, min(self.fetch_size, self.fetch_size * len(chunk) // max(events, 1)))

    def finish(self, batch: BatchInfo) -> None:
        connection = self.connection
        try:
            with translating(f"finishing batch {batch.id} of {self.queue!r}"):
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pgq.finish_batch(%s)", (batch.id,))
                connection.commit()
        except BaseException:
            self.abandon()
            raise

    def abandon(self) -> None:
        """Roll back whatever the batch connection holds; the batch stays unfinished."""
        if self._batches is not None and not self._batches.closed:
            try:
                self._batches.rollback()
            except psycopg2.Error:
                self._batches.close()
