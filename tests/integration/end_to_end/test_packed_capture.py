"""Packed capture under a concurrent workload and relay kills: the copy equals the source.

The set packs with small limits (7 changes or 600 bytes of their data per queue row),
so rows fill up inside statements, transactions and savepoints. Writer threads run
transactions of single-row statements with savepoints (some rolled back), bulk
statements, and transactions that change a table's shape between their writes (ADD
COLUMN, then writes that use it); the relay is killed -9 twice while they write and
started again. Once the writes stop and the worker caught up, both tables of the
PostgreSQL copy have the source's columns and rows.
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

from pgshovel.inspection import catalog
from pgshovel.sandbox import SandboxConnection

from ._scenario import Processes, Scenario, captured_source
from ._targets import make_target, source_columns, source_rows
from ._threads import WriterThreads

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]

SCHEMA = """
CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL, note text);
CREATE TABLE events (id bigint PRIMARY KEY, kind text, payload text);
INSERT INTO accounts SELECT g, 0, 'n' || g FROM generate_series(1, 300) g;
"""
PACKING = {"rows": 7, "bytes": 600}
#: how many columns the shape-changing transactions add (c1, c2, ...), one each
ADDED = 3


class Writer(WriterThreads):
    """Small transactions with savepoints, bulk statements, and DDL between writes."""

    rolled_back = (psycopg2.errors.DeadlockDetected, psycopg2.errors.LockNotAvailable)

    def __init__(self, dsn: str, threads: int = 3) -> None:
        super().__init__(dsn, threads)
        self._keys = itertools.count(1)
        self.shapes = 0
        self.rollbacks = 0

    def write(self, cursor: Any, rng: random.Random) -> None:
        cursor.execute("SET LOCAL lock_timeout = '5s'")
        choice = rng.random()
        if choice < 0.08:
            self._change_shape(cursor, rng)
        elif choice < 0.25:
            self._bulk(cursor, rng)
        else:
            self._small(cursor, rng)

    def _account(self, rng: random.Random) -> int:
        return rng.randrange(1, 301)

    def _event(self, cursor: Any, kind: str) -> None:
        cursor.execute(
            "INSERT INTO events VALUES (%s, %s, repeat('p', 40))", (next(self._keys), kind)
        )

    def _small(self, cursor: Any, rng: random.Random) -> None:
        for _ in range(rng.randrange(1, 4)):
            cursor.execute(
                "UPDATE accounts SET balance = balance + 1 WHERE id = %s", (self._account(rng),)
            )
            self._event(cursor, "small")
        cursor.execute("SAVEPOINT part")
        for _ in range(rng.randrange(1, 5)):
            self._event(cursor, "in savepoint")
            cursor.execute(
                "UPDATE accounts SET note = %s WHERE id = %s",
                (f"note {rng.random()}", self._account(rng)),
            )
        if rng.random() < 0.4:
            cursor.execute("ROLLBACK TO SAVEPOINT part")
            self.rollbacks += 1
        else:
            cursor.execute("RELEASE SAVEPOINT part")
        self._event(cursor, "after savepoint")

    def _bulk(self, cursor: Any, rng: random.Random) -> None:
        start = next(self._keys)
        for _ in range(800):
            next(self._keys)
        cursor.execute(
            "INSERT INTO events SELECT g, 'bulk', md5(g::text) FROM generate_series(%s, %s) g",
            (start, start + 799),
        )
        cursor.execute(
            "UPDATE accounts SET balance = balance - 1 WHERE id %% 5 = %s", (rng.randrange(5),)
        )

    def _change_shape(self, cursor: Any, rng: random.Random) -> None:
        if self.shapes >= ADDED:
            return self._small(cursor, rng)
        column = f"c{self.shapes + 1}"
        self._event(cursor, "before the shape")
        cursor.execute(
            sql.SQL("ALTER TABLE accounts ADD COLUMN IF NOT EXISTS {} int DEFAULT 5").format(
                sql.Identifier(column)
            )
        )
        cursor.execute(
            sql.SQL("UPDATE accounts SET {} = {} + id WHERE id <= 20").format(
                sql.Identifier(column), sql.Identifier(column)
            )
        )
        self._event(cursor, f"after {column}")
        self.shapes += 1
        return None


def test_packed_capture_under_savepoints_ddl_bulk_and_relay_kills(
    sandbox: SandboxConnection,
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: Processes,
) -> None:
    source = captured_source(
        make_database, zookeeper, cluster_name, SCHEMA, ["accounts", "events"], packing=PACKING
    )
    connection = psycopg2.connect(source)
    try:
        installed = catalog.installed_triggers(connection, "public", "accounts")
    finally:
        connection.close()
    assert {trigger.arguments[5] for trigger in installed.values()} == {"7,600,copy"}
    copy = make_target("postgresql", make_database, tmp_path, cluster_name)
    run = Scenario(sandbox, cluster_name, source, tmp_path, processes, kafka_config)
    configuration = run.replication_yml(copy.spec)
    relay, worker = run.start_streaming(configuration, copy.progress)
    writer = Writer(source)
    writer.start()
    try:
        for _ in range(2):
            time.sleep(3.0)
            relay.kill()
            time.sleep(1.0)
            relay = run.start_relay(lead=False)
        time.sleep(3.0)
    finally:
        writer.stop()
    assert writer.committed > 30 and writer.rollbacks > 0 and writer.shapes >= 2
    run.wait_caught_up(worker, lambda: copy.progress()[0])
    assert worker.stop() == 0, worker.output()[-3000:]
    assert relay.stop() == 0, relay.output()[-3000:]
    for table in ("accounts", "events"):
        assert copy.columns(table) == source_columns(source, table), table
        assert copy.rows(table) == source_rows(source, table), table
