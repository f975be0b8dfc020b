"""What makes the relay safe across a source failover: the right primary, and nothing lost.

Three checks, each on the relay's batch connection:

- ``wait_primary``: a set's DSN that reaches a standby still in recovery (a
  failover under way: the set was pointed at it before its promotion) is
  polled every ``PROMOTION_POLL`` seconds until the promotion, so publishing
  resumes within that of it (not after the error policy's backoff) — never an
  error that ends the relay, never a write attempted on a read-only server.
- ``check_stream_known``: after connecting, the last batch the stream holds from
  this source node must end at a tick the source has, with the same snapshot.
  A standby promoted before it received everything (asynchronous replication)
  lacks it: the stream and the copies then hold transactions the new primary
  lost, and publishing on would mix two histories under one node id. The relay
  stops with an error naming the remedy instead.
- ``StandbyGate`` (failover-safe publishing, relay.yml ``standbys:``): a batch
  is published only once the WAL position after it was taken is replayed on
  every named standby (``pg_stat_replication.replay_lsn``; a standby is named
  by its ``cluster_name``, the default application_name of its replication
  connection, and the promoted one, the source itself, is not waited for), so whatever the
  stream holds, and the batch assignment itself, survive a promotion of any of
  them; a re-send after failover then carries the same batch id and readers
  drop it. The same guarantee PostgreSQL 17 gives logical slots with
  ``synchronized_standby_slots``.
"""

from __future__ import annotations

import logging
import shlex
import threading
import time
import uuid
from collections.abc import Callable, Sequence

from psycopg2 import sql
from psycopg2.extensions import connection as Connection

from pgshovel.cluster.dsn import has_password, mask_dsn
from pgshovel.errors import StreamError
from pgshovel.protocol import configuration_pb2, stream_pb2
from pgshovel.source import translating

logger = logging.getLogger(__name__)

_TICK = (
    "SELECT (SELECT t.tick_snapshot::text FROM pgq.tick t "
    "        WHERE t.tick_queue = q.queue_id AND t.tick_id = %s), "
    "       (SELECT (extract(epoch FROM min(t.tick_time)) * 1000000)::int8 FROM pgq.tick t "
    "        WHERE t.tick_queue = q.queue_id) "
    "FROM pgq.queue q WHERE q.queue_name = %s"
)


PROMOTION_POLL = 0.5


def _in_recovery(connection: Connection) -> bool:
    with translating("checking that the set's database is a primary"):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_is_in_recovery()")
            row = cursor.fetchone()
        connection.rollback()
    return row is not None and bool(row[0])


def wait_primary(
    connection: Connection,
    dsn: str,
    interrupted: Callable[[], bool],
    wait: Callable[[float], object],
) -> bool:
    """Wait while the set's database is a standby in recovery; False if ``interrupted`` first.

    A connection failure on the way is the caller's transient fault, as usual.
    """
    if not _in_recovery(connection):
        return True
    logger.warning(
        "the set's database %r is a standby in recovery (read-only): waiting for its promotion",
        mask_dsn(dsn),
    )
    started = time.monotonic()
    while not interrupted():
        wait(PROMOTION_POLL)
        if not _in_recovery(connection):
            logger.info(
                "%r was promoted: publishing resumes (waited %.1fs)",
                mask_dsn(dsn),
                time.monotonic() - started,
            )
            return True
    return False


def _snapshot_text(tick: stream_pb2.Tick) -> str:
    snapshot = tick.snapshot
    return f"{snapshot.xmin}:{snapshot.xmax}:{','.join(str(x) for x in sorted(snapshot.xip))}"


def check_stream_known(
    connection: Connection,
    queue: str,
    node: bytes,
    last: stream_pb2.Message | None,
    set_name: str,
    remedy: Callable[[], str] = lambda: "",
) -> None:
    """A ``StreamError`` when the stream's last committed batch of ``node`` (its Begin,
    ``last``) ends at a tick this database does not have; ``remedy()`` says what to run."""
    if last is None or last.operation.batch.node != node:
        return  # nothing published yet, or by another node (before a divergence reset)
    end = last.operation.begin.end
    with translating(f"reading tick {end.id!r} of queue {queue!r}"):
        with connection.cursor() as cursor:
            cursor.execute(_TICK, (end.id, queue))
            row = cursor.fetchone()
        connection.rollback()
    found = None if row is None or row[0] is None else str(row[0])
    first_tick = None if row is None or row[1] is None else int(row[1])
    if first_tick is not None and end.timestamp and end.timestamp < first_tick:
        # The batch is older than every tick of this queue: the stream holds an earlier
        # incarnation of the set (dropped and created again), not a lost future.
        return
    expected = _snapshot_text(end) if end.HasField("snapshot") else None
    if found is not None and (expected is None or found == expected):
        return
    expected = expected or "unknown"
    batch = last.operation.batch.id
    raise StreamError(
        f"set {set_name!r}: the stream holds batch {batch!r} of node {uuid.UUID(bytes=node)} "
        f"ending at tick {end.id!r} (snapshot {expected!r}), which this database "
        + ("does not have" if found is None else f"has with another snapshot ({found!r})")
        + ": it is not the database those batches came from, or a standby promoted before it "
        "received them (the copies hold transactions it lost). Publishing on would mix two "
        f"histories. Remedy: {remedy()}; 'standbys:' in relay.yml prevents this (failover-safe "
        "publishing)"
    )


_WITHOUT_PRIMARY_KEY = (
    "SELECT pg_catalog.to_regclass(%s) IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "
    "pg_catalog.pg_index WHERE indrelid = pg_catalog.to_regclass(%s) AND indisprimary)"
)


def divergence_remedy(
    connection: Connection,
    cluster: str,
    set_name: str,
    dsn: str,
    configuration: configuration_pb2.ReplicationSetConfiguration,
) -> str:
    """The commands that end a divergence, each runnable as printed (README "Source
    failover", unplanned): a new node id for this database, a relay restart, then the copies
    repaired — keyed tables by ``set verify --repair``, tables without a key copied again
    (``set verify`` compares them but cannot repair them, and their copies may also receive
    again changes they hold)."""
    admin = f"pgshovel-admin --cluster {shlex.quote(cluster)}"
    shown = mask_dsn(dsn) if has_password(dsn) else dsn
    keyed, unkeyed = [], []
    with translating("reading which tables of the set have no key"):
        with connection.cursor() as cursor:
            for table in configuration.tables:
                name = f"{table.schema}.{table.name}"
                if not table.key_columns:
                    quoted = sql.Identifier(table.schema, table.name).as_string(connection)
                    cursor.execute(_WITHOUT_PRIMARY_KEY, (quoted, quoted))
                    row = cursor.fetchone()
                    if row is not None and row[0]:
                        unkeyed.append(name)
                        continue
                keyed.append(name)
        connection.rollback()
    steps = [
        f"run `{admin} set failover {set_name} --to {shlex.quote(shown)} --accept-divergence` "
        "(a new node id for this database)",
        "restart the relay",
    ]
    if keyed:
        tables = " ".join(shlex.quote(table) for table in keyed) + " " if unkeyed else ""
        steps.append(
            f"`{admin} set verify {set_name} {tables}--repair` (removes from the copies the "
            "changes this database lost)"
        )
    if unkeyed:
        tables = " ".join(shlex.quote(table) for table in unkeyed)
        steps.append(
            f"`{admin} set resnapshot {set_name} {tables}` (tables without a key: their copies "
            "may also hold changes this database lost, or receive again changes they hold)"
        )
    return ", then ".join(steps)


class StandbyGate:
    """Waits until the named standbys replayed the WAL written so far (see module doc)."""

    def __init__(self, standbys: Sequence[str], log_every: float = 10.0) -> None:
        self.standbys = sorted(set(standbys))
        self.log_every = log_every
        #: seconds waited by the last ``wait`` (for metrics and the bench)
        self.last_wait = 0.0
        self._source: tuple[int, list[str]] | None = None

    def _names(self, connection: Connection) -> list[str]:
        """The standbys to wait for: all but the source itself, which a promoted standby
        is (a server's ``cluster_name`` is the default application_name of its replication
        connection, so that is how it appears in the list)."""
        if self._source is None or self._source[0] != id(connection):
            with connection.cursor() as cursor:
                cursor.execute("SELECT current_setting('cluster_name')")
                row = cursor.fetchone()
            itself = "" if row is None else str(row[0])
            names = [name for name in self.standbys if name != itself]
            if len(names) < len(self.standbys):
                logger.info("standby %r is the source itself now: not waited for", itself)
            self._source = (id(connection), names)
        return self._source[1]

    def wait(
        self,
        connection: Connection,
        stop: threading.Event,
        interrupted: Callable[[], bool] = lambda: False,
    ) -> bool:
        """Block until every standby replayed the current WAL position; False if ``stop`` is
        set or ``interrupted()`` (the set moved to another database, leadership lost) first:
        the batch is then abandoned, never published."""
        if not self.standbys:
            return True
        started = time.monotonic()
        with translating("waiting for the standbys to replay the batch"):
            standbys = self._names(connection)
            if not standbys:
                connection.rollback()
                return True
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_current_wal_lsn()")
                row = cursor.fetchone()
                target = row[0] if row else None
                pause, logged = 0.0005, started
                while True:
                    cursor.execute(
                        "SELECT application_name FROM pg_stat_replication "
                        "WHERE application_name = ANY(%s) AND replay_lsn >= %s::pg_lsn",
                        (standbys, target),
                    )
                    caught_up = {name for (name,) in cursor.fetchall()}
                    missing = [name for name in standbys if name not in caught_up]
                    if not missing:
                        break
                    now = time.monotonic()
                    if now - logged >= self.log_every:
                        logged = now
                        logger.warning(
                            "batch held back %.0fs: standby(s) %s have not replayed WAL %s "
                            "(failover-safe publishing); are they connected and is the relay's "
                            "role allowed to read pg_stat_replication (pg_monitor)?",
                            now - started,
                            ", ".join(missing),
                            target,
                        )
                    if stop.wait(pause) or interrupted():
                        connection.rollback()
                        return False
                    pause = min(pause * 2, 0.02)
            connection.rollback()
        self.last_wait = time.monotonic() - started
        return True
