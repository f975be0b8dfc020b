"""Schema changes while writes go on: every target follows, column for column and row for row.

A source table is altered step by step (constant and volatile defaults, a
dropped and a renamed column, int4 -> int8 followed by values past int4, a type
change with USING, a renamed table, an index, a dropped table) while threads keep writing, and
the relay and the worker are killed -9 between the steps and restarted. Once
the writes stop and the worker caught up (and copied again what DDL rewrote),
each target table has the source's columns (names, order, types) and rows —
for PostgreSQL, Parquet, Delta Lake and Iceberg (read through their own
readers; Delta rewrites the table for a drop, rename or type change, Iceberg
changes its schema in place and moves a re-added column back to its place).
"""

from __future__ import annotations

import itertools
import random
import time
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from kazoo.client import KazooClient
from psycopg2 import sql

from pgshovel.sandbox import SandboxConnection

from ._scenario import Processes, Scenario, captured_source
from ._stack import wait_until
from ._targets import make_target, source_columns, source_rows
from ._threads import WriterThreads

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]

SCHEMA = """
CREATE TABLE live (id integer PRIMARY KEY, a integer NOT NULL, s text, n numeric(12,2),
                   d text, e text);
CREATE TABLE moved (id integer PRIMARY KEY, v text);
CREATE TABLE doomed (id integer PRIMARY KEY, v text);
INSERT INTO doomed SELECT g, 'x' || g FROM generate_series(1, 50) g;
INSERT INTO live SELECT g, g, 's' || g, g / 3.0, 'd', 'e' || g FROM generate_series(1, 600) g;
INSERT INTO moved SELECT g, 'v' || g FROM generate_series(1, 200) g;
"""

STEPS = (
    ("ALTER TABLE live ADD COLUMN b numeric DEFAULT 1.50", "relay"),
    ("ALTER TABLE live ADD COLUMN c timestamptz DEFAULT clock_timestamp()", "worker"),
    ("ALTER TABLE live DROP COLUMN d", "relay"),
    ("ALTER TABLE live RENAME COLUMN e TO e2", "worker"),
    ("ALTER TABLE live ALTER COLUMN a TYPE bigint", "relay"),
    ("ALTER TABLE live ALTER COLUMN n TYPE numeric(14,4) USING n * 2", "worker"),
    ("ALTER TABLE moved RENAME TO moved2", "relay"),
    ("CREATE INDEX live_a ON live (a)", "worker"),
    ("DROP TABLE doomed", "relay"),
)
#: writes before each step's DDL and between the DDL and the kill: at least this long and
#: this many commits (9 steps * 2 * 8 commits: the "kept writing" check below holds by design)
STEP_PAUSE = 0.5
STEP_COMMITS = 8


class Writer(WriterThreads):
    """Threads writing to ``live`` and to ``moved`` (under whatever name it has now)."""

    # a rename or a DDL lock raced the write: again
    rolled_back = (psycopg2.errors.UndefinedTable, psycopg2.errors.DeadlockDetected)

    def __init__(self, dsn: str, threads: int = 2) -> None:
        super().__init__(dsn, threads)
        self.moved = "moved"
        self.big = False
        self._keys = itertools.count(10_001)

    def _key(self) -> int:
        return next(self._keys)

    def write(self, cursor: Any, rng: random.Random) -> None:
        value = rng.randrange(5_000_000_000, 9_000_000_000) if self.big else rng.randrange(10**6)
        choice = rng.random()
        if choice < 0.4:
            cursor.execute("INSERT INTO live (id, a) VALUES (%s, %s)", (self._key(), value))
        elif choice < 0.7:
            cursor.execute("UPDATE live SET a = %s WHERE id = %s", (value, rng.randrange(1, 700)))
        elif choice < 0.8:
            cursor.execute("DELETE FROM live WHERE id = %s", (rng.randrange(1, 700),))
        else:
            table = sql.Identifier(self.moved)
            cursor.execute(
                sql.SQL(
                    "INSERT INTO {} VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET v = %s"
                ).format(table),
                (rng.randrange(1, 400), f"w{value}", f"u{value}"),
            )


@pytest.mark.parametrize("target_kind", ["postgresql", "parquet", "delta", "iceberg"])
def test_every_target_follows_schema_changes_under_writes_and_kills(
    target_kind: str,
    sandbox: SandboxConnection,
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: Processes,
) -> None:
    source = captured_source(
        make_database, zookeeper, cluster_name, SCHEMA, ["live", "moved", "doomed"]
    )
    run = Scenario(sandbox, cluster_name, source, tmp_path, processes, kafka_config)
    copy = make_target(target_kind, make_database, tmp_path, cluster_name)
    progress = copy.progress
    configuration = run.replication_yml(copy.spec)
    relay, worker = run.start_streaming(configuration, progress)
    writer = Writer(source)

    def write_some() -> None:
        goal = writer.committed + STEP_COMMITS
        time.sleep(STEP_PAUSE)
        wait_until(lambda: writer.committed >= goal, f"{STEP_COMMITS} more commits")

    writer.start()
    try:
        for statement, victim in STEPS:
            write_some()
            ddl = psycopg2.connect(source)
            with ddl, ddl.cursor() as cursor:
                cursor.execute(statement)
            ddl.close()
            if "TYPE bigint" in statement:
                writer.big = True
            if "RENAME TO moved2" in statement:
                writer.moved = "moved2"
            write_some()
            if victim == "relay":
                relay.kill()
                relay = run.start_relay(lead=False)
            else:
                worker.kill()
                worker = run.start_worker(configuration)
        write_some()
    finally:
        writer.stop()
    assert writer.committed > 100, "the writers kept writing"

    def caught_up() -> None:
        run.wait_caught_up(worker, lambda: progress()[0])

    # First the whole stream (a worker just restarted may not have met the last
    # DDL yet, so it has no copy to do yet), then the copies that DDL asked for,
    # then the stream again (the copies' watermarks went through it).
    caught_up()
    wait_until(
        lambda: progress()[1] == 0,
        "the worker to finish copying what DDL rewrote",
        300,
        worker.alive,
        worker.output,
    )
    caught_up()
    assert worker.stop() == 0, worker.output()[-3000:]
    assert relay.stop() == 0, relay.output()[-3000:]
    log = (tmp_path / "worker.log").read_text()
    assert "copied again" in log, "the volatile default and USING made the worker copy live again"

    assert not copy.holds("doomed"), "DROP TABLE dropped the copy's table"
    for table in ("live", "moved2"):
        assert copy.holds(table), table
        assert copy.columns(table) == source_columns(source, table), table
        assert copy.rows(table) == source_rows(source, table), table
    assert [name for name, _ in source_columns(source, "live")] == [
        "id",
        "a",
        "s",
        "n",
        "e2",
        "b",
        "c",
    ]
