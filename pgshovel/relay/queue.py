"""The PgQ side of the relay: ticking, taking a batch, streaming its events, finishing it.

Transaction discipline (why each step commits where it does):

1. ``tick()`` runs ``pgq.ticker(queue)`` on an autocommit connection: a tick is
   only useful once committed. ``force_tick()`` makes one tick whatever PgQ's
   idle rules say (its one transaction lowers the queue's idle period, ticks,
   and restores it), for a transaction that was in progress at the last tick
   and has committed since (``committed_after``): PgQ would tick for it only
   when the next event comes or its idle period ends.
2. ``next_batch()`` takes the next batch and commits at once, so the batch
   assignment is durable: after a crash the same batch id comes back with the
   same events, and readers can recognise the re-send.
3. ``events()`` streams the batch's rows through a server-side cursor, packed
   rows expanded into their events (``pgshovel.relay.packing``).
4. ``finish()`` runs ``pgq.finish_batch`` and commits; the relay calls it only
   after Kafka acknowledged every message of the batch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psycopg2
import psycopg2.extensions
from psycopg2 import sql

from pgshovel.abc import BatchInfo, EventRow, TickInfo
from pgshovel.cluster import names
from pgshovel.errors import ConfigurationError, PgshovelError
from pgshovel.relay.packed_run import PackedRun
from pgshovel.relay.packing import PACKED_EVENT, events_in, unpacked
from pgshovel.source import connect, translating

CONSUMER = names.CONSUMER
APPLICATION_NAME = "pgshovel-relay"
#: rows of a batch's first fetch: packed rows hold many events each, so the fetches that
#: follow take as many rows as hold about ``fetch_size`` events
FIRST_FETCH = 64
#: how long a scrape may wait for the backlog (connecting, then counting)
BACKLOG_SECONDS = 3

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Backlog:
    """What waits in a queue for the relay: committed events no finished batch holds."""

    events: int
    #: an upper bound of the oldest one's age (seconds); None when there is none
    oldest_seconds: float | None


def read_backlog(cursor: psycopg2.extensions.cursor, queue: str) -> Backlog | None:
    """The relay's backlog in ``queue``, counted from the events (None: no consumer).

    Every committed event not visible in the snapshot of the tick the relay
    finished last is in no finished batch (those of the batch being published,
    and of transactions in progress at that tick, included). PgQ's own count
    compares event numbers, and the events of a transaction in progress at a
    tick carry numbers from before it: during a long transaction's batch it says
    0. An event committed after that tick and after its own transaction began,
    so the later of the two bounds the oldest one's age. Only transactions from
    the snapshot's xmin on are read (an index range of each event table). A
    packed row counts as the changes it holds (its lines after the header).
    """
    cursor.execute(
        "SELECT t.tick_snapshot::text, t.tick_time, p.queue_data_pfx"
        " FROM pgq.get_consumer_info(%s, %s) c"
        " JOIN pgq.queue p ON p.queue_name = c.queue_name"
        " JOIN pgq.tick t ON t.tick_queue = p.queue_id AND t.tick_id = c.last_tick",
        (queue, CONSUMER),
    )
    row = cursor.fetchone()
    if row is None:
        return None
    snapshot, tick_time, events = row
    schema, _, table = str(events).partition(".")
    cursor.execute(
        sql.SQL(
            "SELECT sum(CASE WHEN e.ev_type = %s"
            " THEN length(e.ev_data) - length(replace(e.ev_data, E'\\n', '')) ELSE 1 END),"
            " extract(epoch FROM now() - greatest(min(e.ev_time), %s))"
            " FROM {} e WHERE e.ev_txid >= txid_snapshot_xmin(%s::txid_snapshot)"
            " AND NOT txid_visible_in_snapshot(e.ev_txid, %s::txid_snapshot)"
        ).format(sql.Identifier(schema, table)),
        (PACKED_EVENT, tick_time, snapshot, snapshot),
    )
    counted = cursor.fetchone()
    if counted is None or not counted[0]:
        return Backlog(0, None)
    return Backlog(int(counted[0]), None if counted[1] is None else max(0.0, float(counted[1])))


class BacklogGauge:
    """Reads a queue's backlog for the metrics endpoint's thread, on its own connection
    (opened on first use, again after a failure), within a few seconds or NaN."""

    def __init__(self, dsn: Callable[[], str], queue: str) -> None:
        self._dsn = dsn
        self.queue = queue
        self._connection: psycopg2.extensions.connection | None = None
        self._lock = threading.Lock()
        self._read_at: float | None = None
        self._last: Backlog | None = None

    def __call__(self) -> float:
        """The backlog's events (NaN when they cannot be counted)."""
        backlog = self.read()
        return float("nan") if backlog is None else float(backlog.events)

    def oldest_seconds(self) -> float | None:
        """The bound of the oldest waiting event's age (None: nothing waits, or unknown)."""
        backlog = self.read()
        return None if backlog is None else backlog.oldest_seconds

    def read(self) -> Backlog | None:
        """The backlog, counted at most once a second (one scrape asks for it twice)."""
        with self._lock:
            now = time.monotonic()
            if self._read_at is not None and now - self._read_at < 1.0:
                return self._last
            self._read_at = now
            try:
                if self._connection is None or self._connection.closed:
                    self._connection = connect(
                        self._dsn(),
                        application_name(self.queue),
                        autocommit=True,
                        connect_timeout=BACKLOG_SECONDS,
                    )
                    with self._connection.cursor() as cursor:
                        cursor.execute("SET statement_timeout = %s", (f"{BACKLOG_SECONDS}s",))
                with self._connection.cursor() as cursor:
                    self._last = read_backlog(cursor, self.queue)
            except (PgshovelError, psycopg2.Error) as error:
                logger.debug("cannot count the backlog of %r: %s", self.queue, error)
                self.close()
                self._last = None
            return self._last

    def close(self) -> None:
        if self._connection is not None and not self._connection.closed:
            self._connection.close()
        self._connection = None


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
        self._events_table: sql.Identifier | None = None

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

    def configure_ticker(self, interval: float, max_count: int) -> None:
        """Make ``pgq.ticker``, called once per ``interval`` by the relay, tick at each call
        whenever there are events. Its ``ticker_max_lag`` is half the interval: PgQ measures
        the lag from the last tick's transaction start, the relay's pacer on its own clock,
        so at exactly the interval PgQ often found the lag a hair short and did not tick —
        the pacer then fell back to ``force_tick``'s statements and, at 1,000 tx/s, commit →
        Kafka p99 rose from ~104 ms to ~130 (bench latency group)."""
        lag = f"{max(interval / 2, 0.0):.3f} seconds"
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

    def last_tick_snapshot(self) -> str | None:
        """The txid snapshot of the queue's latest tick (None before any tick)."""
        with translating(f"reading the last tick of {self.queue!r}"):
            with self._ticker_connection().cursor() as cursor:
                cursor.execute(
                    "SELECT t.tick_snapshot::text FROM pgq.tick t"
                    " WHERE t.tick_queue = (SELECT queue_id FROM pgq.queue WHERE queue_name = %s)"
                    " ORDER BY t.tick_queue DESC, t.tick_id DESC LIMIT 1",
                    (self.queue,),
                )
                row = cursor.fetchone()
        return None if row is None else str(row[0])

    def committed_after(self, snapshot: str) -> bool:
        """Whether an event of the queue committed after ``snapshot`` (a tick's) was taken:
        then no batch up to that tick holds it. Only transactions from the snapshot's xmin
        on are looked at (an index range of each event table)."""
        with translating(f"looking for events committed since the last tick of {self.queue!r}"):
            with self._ticker_connection().cursor() as cursor:
                cursor.execute(
                    sql.SQL(
                        "SELECT EXISTS (SELECT 1 FROM {} e"
                        " WHERE e.ev_txid >= txid_snapshot_xmin(%s::txid_snapshot)"
                        " AND NOT txid_visible_in_snapshot(e.ev_txid, %s::txid_snapshot))"
                    ).format(self._event_table(cursor)),
                    (snapshot, snapshot),
                )
                row = cursor.fetchone()
        return row is not None and bool(row[0])

    def _event_table(self, cursor: psycopg2.extensions.cursor) -> sql.Identifier:
        """The queue's event table (the parent of its rotating tables), read once."""
        if self._events_table is None:
            cursor.execute(
                "SELECT queue_data_pfx FROM pgq.queue WHERE queue_name = %s", (self.queue,)
            )
            row = cursor.fetchone()
            if row is None:
                raise ConfigurationError(f"queue {self.queue!r} does not exist")
            schema, _, table = str(row[0]).partition(".")
            self._events_table = sql.Identifier(schema, table)
        return self._events_table

    def force_tick(self) -> int | None:
        """Tick now although no event was written since the last tick (PgQ's idle period would
        delay it): the idle period is 0 for one ``pgq.ticker`` call, in one transaction, so a
        failure leaves it as it was."""
        connection = self._ticker_connection()
        connection.autocommit = False
        try:
            with translating(f"ticking {self.queue!r}"), connection.cursor() as cursor:
                cursor.execute(
                    "SELECT queue_ticker_idle_period::text FROM pgq.queue WHERE queue_name = %s",
                    (self.queue,),
                )
                row = cursor.fetchone()
                if row is None:
                    raise ConfigurationError(f"queue {self.queue!r} does not exist")
                cursor.execute(
                    "SELECT pgq.set_queue_config(%s, 'ticker_idle_period', '0')", (self.queue,)
                )
                cursor.execute("SELECT pgq.ticker(%s)", (self.queue,))
                ticked = cursor.fetchone()
                cursor.execute(
                    "SELECT pgq.set_queue_config(%s, 'ticker_idle_period', %s)",
                    (self.queue, row[0]),
                )
                connection.commit()
        except BaseException:
            self._close_ticker()
            raise
        connection.autocommit = True
        return None if ticked is None or ticked[0] is None else int(ticked[0])

    def _close_ticker(self) -> None:
        """Drop the ticker connection (and whatever transaction it held)."""
        if self._ticker is not None and not self._ticker.closed:
            self._ticker.close()
        self._ticker = None

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

    def events(self, batch: BatchInfo) -> Iterator[list[EventRow | PackedRun]]:
        """Yield the batch's events in chunks of about ``fetch_size``, in event order (packed
        rows expanded; their runs of COPY lines as ``PackedRun``s)."""
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
                yield from unpacked(self._fetched(cursor), runs=True)

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
