"""The snapshot loader: one exported snapshot, key ranges read in parallel by Spark tasks.

The driver opens a REPEATABLE READ transaction on the source, exports its
snapshot and records ``txid_current_snapshot()``, picks key range boundaries
from a sorted sample of each table's keys (in a separate short transaction, so
that the exporting one holds no table lock), and keeps that transaction open
while Spark tasks (one per range) each import the snapshot and stream their
range with ``COPY (SELECT ...) TO STDOUT`` into the target's snapshot sink.
Every task therefore reads the same consistent state of every table. A
TRUNCATE committed during the load (not MVCC-safe: later readers of the old
snapshot see the table empty) reaches the target through the stream anyway,
its transaction not being in the snapshot.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

from psycopg2 import sql
from psycopg2.extensions import connection as Connection

from pgshovel.abc import SnapshotSink, TableLoadReport
from pgshovel.errors import DatabaseError
from pgshovel.replication.progress import CountsParam, ProgressLogger
from pgshovel.settings import PositiveInt, PositiveSeconds
from pgshovel.source import (
    KeyRange,
    TableShape,
    connect,
    make_ranges,
    own_rows,
    pick_boundaries,
    range_predicate,
)

logger = logging.getLogger(__name__)

_ESTIMATE = """
SELECT c.reltuples::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relname = %s
"""

#: sampled keys per range wanted when choosing boundaries
SAMPLE_PER_RANGE = 64


def range_query(key_range: KeyRange) -> sql.Composable:
    table = key_range.table
    return sql.SQL("SELECT {} FROM {} WHERE {}").format(
        sql.SQL(", ").join(sql.Identifier(name) for name in table.column_names),
        own_rows(table),
        range_predicate(key_range),
    )


def estimate_rows(connection: Connection, table: TableShape) -> int:
    """The planner's row estimate, or an exact count when the table was never analyzed."""
    with connection.cursor() as cursor:
        cursor.execute(_ESTIMATE, (table.schema, table.name))
        row = cursor.fetchone()
        if row is not None and row[0] is not None and row[0] >= 0:
            return int(row[0])
        cursor.execute(sql.SQL("SELECT count(*) FROM {}").format(own_rows(table)))
        counted = cursor.fetchone()
        return int(counted[0]) if counted is not None else 0


def sample_keys(connection: Connection, table: TableShape, percent: float) -> list[tuple[str, ...]]:
    """Keys of a Bernoulli sample as text, in key order."""
    keys = [sql.Identifier("t", name) for name in table.key]
    query = sql.SQL("SELECT {} FROM {} AS t TABLESAMPLE BERNOULLI ({}) ORDER BY {}").format(
        sql.SQL(", ").join(sql.SQL("{}::text").format(key) for key in keys),
        own_rows(table),
        sql.Literal(percent),
        sql.SQL(", ").join(keys),
    )
    with connection.cursor() as cursor:
        cursor.execute(query)
        return [tuple(row) for row in cursor.fetchall()]


def copy_range(source_dsn: str, snapshot_id: str, key_range: KeyRange, out: IO[bytes]) -> None:
    """Write one range's rows as COPY text, read in the imported snapshot."""
    connection = connect(source_dsn, "pgshovel-replicate snapshot")
    try:
        connection.set_session(isolation_level="REPEATABLE READ", readonly=True)
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION SNAPSHOT %s", (snapshot_id,))
            copy = sql.SQL("COPY ({}) TO STDOUT").format(range_query(key_range))
            cursor.copy_expert(copy.as_string(cursor), out, size=1 << 16)
        connection.rollback()
    finally:
        connection.close()


def _load_partition(
    source_dsn: str, snapshot_id: str, sink: SnapshotSink, counts: Any
) -> Callable[[Iterator[KeyRange]], Iterator[tuple[str, int, float, float]]]:
    def load(ranges: Iterator[KeyRange]) -> Iterator[tuple[str, int, float, float]]:
        for key_range in ranges:
            started = time.time()

            def copy_out(out: IO[bytes], key_range: KeyRange = key_range) -> None:
                copy_range(source_dsn, snapshot_id, key_range, out)

            rows = sink.load_range(key_range, copy_out)
            counts.add({key_range.table.qualified: rows})
            yield key_range.table.qualified, rows, started, time.time()

    return load


class PostgresSnapshotLoader:
    """Loads every table of the set from one snapshot, ``ranges_per_table`` tasks per table."""

    def __init__(
        self, ranges_per_table: PositiveInt = 8, progress_interval: PositiveSeconds = 10.0
    ) -> None:
        self.ranges_per_table = ranges_per_table
        self.progress_interval = float(progress_interval)

    def plan(
        self, connection: Connection, tables: Sequence[TableShape]
    ) -> tuple[list[KeyRange], dict[str, int]]:
        """The key ranges of every table and each table's estimated rows."""
        ranges: list[KeyRange] = []
        estimates: dict[str, int] = {}
        for table in tables:
            estimate = estimate_rows(connection, table)
            estimates[table.qualified] = estimate
            if not table.key or estimate == 0 or self.ranges_per_table == 1:
                ranges.extend(make_ranges(table, []))
                continue
            percent = min(100.0, 100.0 * SAMPLE_PER_RANGE * self.ranges_per_table / estimate)
            boundaries = pick_boundaries(
                sample_keys(connection, table, percent), self.ranges_per_table
            )
            ranges.extend(make_ranges(table, boundaries))
        return ranges, estimates

    def load(
        self,
        spark: Any,
        source_dsn: str,
        read_tables: Callable[[Connection], list[TableShape]],
        sink: SnapshotSink,
        on_exported: Callable[[str, list[TableShape]], None],
    ) -> list[TableLoadReport]:
        connection = connect(source_dsn, "pgshovel-replicate snapshot export")
        try:
            connection.set_session(isolation_level="REPEATABLE READ", readonly=True)
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_export_snapshot(), txid_current_snapshot()::text")
                row = cursor.fetchone()
            if row is None:
                raise DatabaseError("pg_export_snapshot() returned nothing; cannot load")
            snapshot_id, txid_snapshot = row
            logger.info("exported snapshot %s (transactions %s)", snapshot_id, txid_snapshot)
            tables = read_tables(connection)
            on_exported(txid_snapshot, tables)
            # Sampled in a transaction of its own: a sample read in the exporting
            # transaction would hold each table's lock until the load ends, and a
            # TRUNCATE queued behind that lock would block every later range of the
            # table (and the source's writers) for good. Boundaries need no snapshot.
            planner = connect(source_dsn, "pgshovel-replicate snapshot plan")
            try:
                ranges, estimates = self.plan(planner, tables)
            finally:
                planner.close()
            logger.info(
                "loading %d table(s) in %d range(s): %s",
                len(tables),
                len(ranges),
                ", ".join(f"{name} ~{rows} rows" for name, rows in estimates.items()),
            )
            context = spark.sparkContext
            counts = context.accumulator({}, CountsParam())
            job = context.parallelize(ranges, len(ranges)).mapPartitions(
                _load_partition(source_dsn, snapshot_id, sink, counts)
            )
            with ProgressLogger(lambda: dict(counts.value), estimates, self.progress_interval):
                results = job.collect()
            # Only now may the exporting transaction end: every task imported the snapshot.
            connection.rollback()
        finally:
            connection.close()
        return summarize(tables, results)


def summarize(
    tables: Sequence[TableShape], results: Sequence[tuple[str, int, float, float]]
) -> list[TableLoadReport]:
    """Rows per table and the wall time from its first range's start to its last range's end."""
    reports = []
    for table in tables:
        mine = [result for result in results if result[0] == table.qualified]
        rows = sum(result[1] for result in mine)
        seconds = max(r[3] for r in mine) - min(r[2] for r in mine) if mine else 0.0
        report = TableLoadReport(table=table.qualified, rows=rows, seconds=seconds)
        logger.info(
            "snapshot of %s: %d rows in %.1fs (%.0f rows/s)",
            report.table,
            report.rows,
            report.seconds,
            report.rows_per_second,
        )
        reports.append(report)
    return reports
