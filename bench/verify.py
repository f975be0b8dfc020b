"""Verify speed: range checksums (rows/s) ÷ ``SELECT count(*)``, and ÷ copying the rows out.

``set verify`` computes, inside the database, per key range, 1024 bucket
checksums over every row's output text (``pgshovel.source.checksum_query``)
and ships only those. Two baselines of the same table run alternating with it
in the same run: a plain ``count(*)`` (the floor: it reads every row but
formats no value), and reading every row out with ``COPY ... TO STDOUT`` into a
discarding sink (what a resnapshot or a client-side comparison would read),
which carries the goal.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from psycopg2 import sql

from bench import _schema, _stack
from bench._modes import Settings
from bench._report import Figure, Goal
from bench._stats import schedule
from bench.snapshot import prepare_source
from pgshovel.replication.worker import read_table_shapes
from pgshovel.sandbox import SandboxConnection
from pgshovel.source import Chunk, KeyRange, checksum_query, chunk_condition

logger = logging.getLogger(__name__)


class _LineCounter:
    """A write-only sink for ``copy_expert`` that keeps only the number of lines."""

    def __init__(self) -> None:
        self.lines = 0

    def write(self, data: bytes) -> int:
        self.lines += data.count(b"\n")
        return len(data)


@dataclass
class VerifyRuns:
    checksum_rates: list[float] = field(default_factory=list)
    count_rates: list[float] = field(default_factory=list)
    copy_rates: list[float] = field(default_factory=list)


def measure(sandbox: SandboxConnection, settings: Settings) -> VerifyRuns:
    source = prepare_source(sandbox, settings.snapshot_rows)
    table = read_table_shapes(_stack.set_configuration(source, [_schema.ORDERS]))[0]
    chunk = Chunk("bench", "bench", KeyRange(table, 0, None, None))
    checksums = checksum_query(table, chunk_condition(chunk, "t"))
    count = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table.schema, table.name))
    columns = sql.SQL(", ").join(sql.Identifier(name) for name in table.column_names)
    copy = sql.SQL("COPY (SELECT {} FROM {}) TO STDOUT").format(
        columns, sql.Identifier(table.schema, table.name)
    )
    runs = VerifyRuns()
    connection = _stack.connect_autocommit(source)
    try:
        with connection.cursor() as cursor:
            copy_text = copy.as_string(cursor)
            for number, variant in schedule(settings.rounds, ["checksums", "count", "copy"]):
                started = time.monotonic()
                if variant == "checksums":
                    cursor.execute(checksums)
                    counted = sum(int(row[1]) for row in cursor.fetchall())
                elif variant == "count":
                    cursor.execute(count)
                    counted = sum(int(row[0]) for row in cursor.fetchall())
                else:
                    sink = _LineCounter()
                    cursor.copy_expert(copy_text, sink, size=1 << 16)
                    counted = sink.lines
                seconds = time.monotonic() - started
                if counted != settings.snapshot_rows:
                    raise RuntimeError(
                        f"{variant} saw {counted!r} rows, not {settings.snapshot_rows}"
                    )
                rates = {
                    "checksums": runs.checksum_rates,
                    "count": runs.count_rates,
                    "copy": runs.copy_rates,
                }[variant]
                rates.append(counted / seconds)
                logger.info("verify round %d %s: %.0f rows/s", number + 1, variant, rates[-1])
    finally:
        connection.close()
    return runs


def figures(runs: VerifyRuns, settings: Settings) -> list[Figure]:
    return [
        Figure(
            key="verify.count",
            title="verify checksums inside PostgreSQL (rows/s)",
            unit="/s",
            values=runs.checksum_rates,
            baseline=runs.count_rates,
            baseline_title="SELECT count(*) of the same table",
            details={"rows": settings.snapshot_rows},
        ),
        Figure(
            key="verify.rows",
            title="verify checksums inside PostgreSQL (rows/s)",
            unit="/s",
            values=runs.checksum_rates,
            baseline=runs.copy_rates,
            baseline_title="COPY of the same rows to the client",
            goals=(Goal("ratio", ">=", 0.1),),
            details={"rows": settings.snapshot_rows},
        ),
    ]
