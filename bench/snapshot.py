"""Snapshot load: the loader's rows/s ÷ ``COPY (SELECT ...) TO STDOUT | COPY ... FROM STDIN``.

A source database holds ``snapshot_rows`` orders. Each loader run empties the
target's table (``begin_snapshot``) and times ``PostgresSnapshotLoader.load``
(one exported snapshot, key ranges copied in parallel by Spark tasks into the
PostgreSQL target); each baseline run empties the same table and times two
``psql`` processes piped together, one running ``COPY (SELECT ...) TO STDOUT``
on the source and the other ``COPY ... FROM STDIN`` on the target.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from psycopg2 import sql

from bench import _schema, _stack
from bench._modes import Settings
from bench._report import Figure, Goal
from bench._stats import schedule
from pgshovel.replication.loaders import PostgresSnapshotLoader
from pgshovel.replication.targets.postgresql import PostgresTarget
from pgshovel.replication.worker import read_table_shapes
from pgshovel.sandbox import SandboxConnection
from pgshovel.source import TableShape
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.state import WorkerState

logger = logging.getLogger(__name__)

SOURCE = "pgshovel_bench_snapshot_source"
TARGET = "pgshovel_bench_snapshot_target"
RANGES_PER_TABLE = 4
FILL_CHUNK = 100_000


@dataclass
class SnapshotRuns:
    loader_rates: list[float] = field(default_factory=list)
    copy_rates: list[float] = field(default_factory=list)


def _psql() -> str:
    return str(
        Path(os.environ.get("PGSHOVEL_POSTGRES_BINDIR", "/usr/lib/postgresql/15/bin")) / "psql"
    )


def prepare_source(sandbox: SandboxConnection, rows: int) -> str:
    dsn = _stack.create_database(sandbox, SOURCE)
    statements: list[sql.Composable | str] = [_schema.ORDERS_DDL]
    statements += [
        _schema.insert_orders(first, min(FILL_CHUNK, rows - first + 1))
        for first in range(1, rows + 1, FILL_CHUNK)
    ]
    statements.append("VACUUM ANALYZE")
    _stack.execute(dsn, statements)
    return dsn


def copy_pipe(source: str, target: str, table: TableShape) -> float:
    """Seconds to pipe the table from source to target through two psql processes."""
    columns = sql.SQL(", ").join(sql.Identifier(name) for name in table.column_names)
    name = sql.Identifier(table.schema, table.name)
    conn = _stack.connect_autocommit(target)
    try:
        copy_out = sql.SQL("COPY (SELECT {} FROM {}) TO STDOUT").format(columns, name)
        copy_in = sql.SQL("COPY {} ({}) FROM STDIN").format(name, columns)
        out_text, in_text = copy_out.as_string(conn), copy_in.as_string(conn)
        with conn.cursor() as cursor:
            cursor.execute(sql.SQL("TRUNCATE {}").format(name))
    finally:
        conn.close()
    started = time.monotonic()
    reader = subprocess.Popen(
        [_psql(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", source, "-c", out_text],
        stdout=subprocess.PIPE,
    )
    try:
        writer = subprocess.run(
            [_psql(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", target, "-c", in_text],
            stdin=reader.stdout,
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        if reader.stdout is not None:
            reader.stdout.close()
        reader.wait(60)
    seconds = time.monotonic() - started
    if reader.returncode != 0 or writer.returncode != 0:
        raise RuntimeError(
            f"psql COPY pipe failed (reader {reader.returncode!r}, writer {writer.returncode!r}): "
            f"{writer.stderr.strip()}"
        )
    return seconds


def measure(sandbox: SandboxConnection, settings: Settings, spark: Any) -> SnapshotRuns:
    source = prepare_source(sandbox, settings.snapshot_rows)
    target_dsn = _stack.create_database(sandbox, TARGET)
    tables = read_table_shapes(_stack.set_configuration(source, [_schema.ORDERS]))
    target = PostgresTarget(target_dsn)
    target.open(_stack.CLUSTER, "snapshot")
    loader = PostgresSnapshotLoader(ranges_per_table=RANGES_PER_TABLE, progress_interval=3600.0)
    runs = SnapshotRuns()
    try:
        for number, variant in schedule(settings.rounds, ["loader", "copy"]):
            if variant == "loader":
                target.begin_snapshot(
                    WorkerState(
                        "snapshot", "1:1:", StreamPosition.start((0,)), tables=tuple(tables)
                    )
                )
                started = time.monotonic()
                reports = loader.load(
                    spark, source, lambda _: tables, target.snapshot_sink(), lambda *_: None
                )
                seconds = time.monotonic() - started
                rows = sum(report.rows for report in reports)
                if rows != settings.snapshot_rows:
                    raise RuntimeError(
                        f"the loader copied {rows!r} rows, the source holds "
                        f"{settings.snapshot_rows!r}"
                    )
                runs.loader_rates.append(rows / seconds)
            else:
                seconds = sum(copy_pipe(source, target_dsn, table) for table in tables)
                runs.copy_rates.append(settings.snapshot_rows / seconds)
            rates = runs.loader_rates if variant == "loader" else runs.copy_rates
            logger.info("snapshot round %d %s: %.0f rows/s", number + 1, variant, rates[-1])
    finally:
        target.close()
    return runs


def figures(runs: SnapshotRuns, settings: Settings) -> list[Figure]:
    return [
        Figure(
            key="snapshot.rows",
            title="snapshot loader into PostgreSQL (rows/s)",
            unit="/s",
            values=runs.loader_rates,
            baseline=runs.copy_rates,
            baseline_title="psql COPY TO | COPY FROM",
            goals=(Goal("ratio", ">=", 0.5),),
            details={"rows": settings.snapshot_rows, "ranges_per_table": RANGES_PER_TABLE},
        )
    ]
