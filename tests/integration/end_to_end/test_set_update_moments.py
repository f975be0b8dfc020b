"""``set update`` at each moment of the pipeline, under writes: nothing exits, the copy is exact.

One run, five updates, each adding a table, removing one and changing the key
of a third, while threads keep writing to every table: (1) before the worker
notes its start offset and exports its snapshot (and once the relay published
the update, so it lies before that offset), (2) after the export, before the
worker read the set (ZooKeeper already says what the snapshot does not see
yet), (3) once the load is recorded, before its ranges are copied, (4) while
streaming and (5) while the relay's source connections are being killed and it
reconnects. The first three are made exact by the worker's test-only holds
(``pgshovel.replication.holds``). At the end the relay and the worker still run
and stop with 0, every table of the set equals the source row for row with the
new keys, the first removed table never reached the copy, and every other
removed table holds exactly the rows it had when it left the set although the
source changed it since.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from kazoo.client import KazooClient
from psycopg2 import sql

from pgshovel.admin import planning, twophase
from pgshovel.cluster import names
from pgshovel.cluster.sets import parse_set_document
from pgshovel.replication.holds import VARIABLE
from pgshovel.sandbox import SandboxConnection
from tests.integration.admin._admin import context
from tests.integration.capture._capture import SET, install
from tests.integration.relay._relay import terminate

from ._scenario import Processes, Scenario
from ._stack import wait_until
from ._targets import make_target, source_rows
from ._threads import WriterThreads

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]

MOMENTS = ("before-export", "after-export", "loading", "streaming", "relay-reconnecting")
ROWS = 50


def tables(kind: str) -> list[str]:
    return [f"{kind}{number}" for number in range(1, len(MOMENTS) + 1)]


ALL = ["keep", *tables("gone"), *tables("rekey"), *tables("late")]


class Writer(WriterThreads):
    """Threads inserting, updating and deleting rows of every table not frozen, one
    table per transaction; ``guard`` is held from a write to its commit."""

    pause = 0.01

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn, threads=2)
        self.guard = threading.Lock()
        self.frozen: set[str] = set()
        self._keys = itertools.count(10_000)

    def write(self, cursor: Any, rng: random.Random) -> None:
        with self.guard:
            table = sql.Identifier(rng.choice([name for name in ALL if name not in self.frozen]))
            choice = rng.random()
            if choice < 0.4:
                key = next(self._keys)
                cursor.execute(
                    sql.SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(table),
                    (key, key + 100_000, rng.randrange(1000)),
                )
            elif choice < 0.8:
                cursor.execute(
                    sql.SQL("UPDATE {} SET v = v + 1 WHERE id = %s").format(table),
                    (rng.randrange(1, ROWS + 1),),
                )
            else:
                cursor.execute(
                    sql.SQL("DELETE FROM {} WHERE id = %s").format(table),
                    (rng.randrange(1, ROWS + 1),),
                )
            cursor.connection.commit()

    @contextmanager
    def frozen_table(self, name: str) -> Iterator[None]:
        """No write to ``name`` inside the block (none is under way when it starts)."""
        with self.guard:
            self.frozen.add(name)
        try:
            yield
        finally:
            self.frozen.discard(name)


def create_tables(source: str) -> None:
    connection = psycopg2.connect(source)
    with connection, connection.cursor() as cursor:
        for name in ALL:
            table = sql.Identifier(name)
            cursor.execute(
                sql.SQL(
                    "CREATE TABLE {} (id integer PRIMARY KEY, code integer NOT NULL UNIQUE, "
                    "v integer NOT NULL)"
                ).format(table)
            )
            cursor.execute(
                sql.SQL(
                    "INSERT INTO {} SELECT g, g + 100000, g FROM generate_series(1, %s) g"
                ).format(table),
                (ROWS,),
            )
    connection.close()


def set_entries(done: int) -> list[dict[str, Any]]:
    """The set's tables once ``done`` updates ran: update n removed gone<n>, keyed rekey<n>
    by ``code`` and added late<n>."""
    entries: list[dict[str, Any]] = [{"name": "keep"}]
    for number in range(1, len(MOMENTS) + 1):
        if number > done:
            entries.append({"name": f"gone{number}"})
        entries.append(
            {"name": f"rekey{number}", "key_columns": ["code"]}
            if number <= done
            else {"name": f"rekey{number}"}
        )
        if number <= done:
            entries.append({"name": f"late{number}"})
    return entries


def queue_mark(source: str, cluster: str) -> int:
    """The queue's event sequence now: every event committed so far has an id up to it."""
    connection = psycopg2.connect(source)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pgq.seq_getval(queue_event_seq) FROM pgq.queue WHERE queue_name = %s",
                (names.queue_name(cluster, SET),),
            )
            row = cursor.fetchone()
    finally:
        connection.close()
    assert row is not None
    return int(row[0])


def published_through(source: str, cluster: str, mark: int) -> bool:
    """Whether the relay finished a batch ending at a tick taken after ``mark`` was read."""
    connection = psycopg2.connect(source)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT t.tick_event_seq >= %s FROM pgq.queue q "
                "JOIN pgq.subscription s ON s.sub_queue = q.queue_id "
                "JOIN pgq.tick t ON t.tick_queue = q.queue_id AND t.tick_id = s.sub_last_tick "
                "WHERE q.queue_name = %s",
                (mark, names.queue_name(cluster, SET)),
            )
            row = cursor.fetchone()
    finally:
        connection.close()
    return row is not None and bool(row[0])


def primary_key(dsn: str, table: str) -> list[str]:
    connection = psycopg2.connect(dsn)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a "
                "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                "WHERE i.indrelid = %s::regclass AND i.indisprimary ORDER BY a.attnum",
                (f"public.{table}",),
            )
            return [str(row[0]) for row in cursor.fetchall()]
    finally:
        connection.close()


def exists(dsn: str, table: str) -> bool:
    connection = psycopg2.connect(dsn)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass(%s) IS NOT NULL", (f"public.{table}",))
            row = cursor.fetchone()
    finally:
        connection.close()
    return row is not None and bool(row[0])


class Storm:
    """Kills the relay's source connections every 0.3 s until stopped."""

    def __init__(self, admin_dsn: str) -> None:
        self.admin_dsn = admin_dsn
        self.killed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def __enter__(self) -> Storm:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            self.killed += terminate(self.admin_dsn, "pgshovel-relay")


def test_set_update_at_every_moment_ends_with_an_exact_copy(
    sandbox: SandboxConnection,
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: Processes,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = make_database("source")
    create_tables(source)
    install(zookeeper, cluster_name, source, set_entries(0))
    run = Scenario(sandbox, cluster_name, source, tmp_path, processes, kafka_config)
    copy = make_target("postgresql", make_database, tmp_path, cluster_name)
    configuration = run.replication_yml(copy.spec, ranges_per_table=1)
    holds = tmp_path / "holds"
    holds.mkdir()
    for point in MOMENTS[:3]:
        (holds / point).touch()
    monkeypatch.setenv(VARIABLE, str(holds))
    relay = run.start_relay()
    writer = Writer(source)
    writer.start()
    worker = run.start_worker(configuration)
    removed: dict[str, list[tuple[str | None, ...]]] = {}

    def update(number: int) -> None:
        """Run update ``number``; note the rows gone<number> had when it left the set."""
        gone = f"gone{number}"
        with writer.frozen_table(gone):
            removed[gone] = source_rows(source, gone)
            document = {"database": {"dsn": source}, "tables": set_entries(number)}
            with context(zookeeper, cluster_name) as ctx:
                plan = planning.plan_set_update(ctx, SET, parse_set_document(document, "test"))
                twophase.execute(plan, ctx.connections, zookeeper)
        with psycopg2.connect(source) as connection, connection.cursor() as cursor:
            # A change the copy must never see: the table left the set.
            cursor.execute(sql.SQL("UPDATE {} SET v = -1").format(sql.Identifier(gone)))
        connection.close()

    def held(point: str) -> None:
        wait_until(
            lambda: f"test hold: waiting at {point}" in worker.output(),
            f"the worker to hold at {point}",
            240,
            worker.alive,
            worker.output,
        )

    try:
        # 1. Before the start offset is noted: the update is published before it.
        held("before-export")
        update(1)
        mark = queue_mark(source, cluster_name)
        wait_until(
            lambda: published_through(source, cluster_name, mark),
            "the relay to publish update 1",
            60,
            relay.alive,
            relay.output,
        )
        (holds / "before-export").unlink()
        # 2. Exported, the set not read yet: ZooKeeper is ahead of the snapshot.
        held("after-export")
        update(2)
        (holds / "after-export").unlink()
        # 3. The load recorded, its ranges not copied yet.
        held("loading")
        update(3)
        (holds / "loading").unlink()
        # 4. Streaming.
        run.streaming(worker, copy.progress, timeout=240)
        time.sleep(1.0)
        update(4)
        # 5. While the relay loses its source connections again and again.
        time.sleep(1.0)
        with Storm(sandbox.postgres_dsn) as storm:
            wait_until(
                lambda: "retrying with backoff" in relay.output(),
                "the relay to lose its source",
                60,
                relay.alive,
                relay.output,
            )
            update(5)
            time.sleep(2.0)
        assert storm.killed > 0
        time.sleep(2.0)
    finally:
        writer.stop()
    assert writer.committed > 100, f"the writers kept writing ({writer.committed})"

    def caught_up() -> None:
        run.wait_caught_up(worker, lambda: copy.progress()[0], timeout=240)

    caught_up()
    wait_until(
        lambda: copy.progress()[1] == 0,
        "the backfills of the added tables",
        240,
        worker.alive,
        worker.output,
    )
    caught_up()
    assert relay.alive() and worker.alive(), "no process exited"
    assert worker.stop() == 0, worker.output()[-3000:]
    assert relay.stop() == 0, relay.output()[-3000:]

    log = worker.output()
    # Moment 2 met ZooKeeper ahead of the exported snapshot, and the snapshot followed the source.
    assert "table 'public'.'late2' of set 'capture' has no capture trigger in the exported" in log
    assert "table 'public'.'gone2' is still captured in the exported snapshot" in log
    assert "table 'public'.'rekey2' is copied as the exported snapshot captures it" in log
    assert "not a table of the set" not in log
    for entry in set_entries(len(MOMENTS)):
        name = entry["name"]
        assert copy.rows(name) == source_rows(source, name), name
        assert primary_key(copy.dsn, name) == list(entry.get("key_columns", ["id"])), name
    # The first removed table left before the snapshot: it never reached the copy.
    assert not exists(copy.dsn, "gone1")
    for number in range(2, len(MOMENTS) + 1):
        gone = f"gone{number}"
        assert removed[gone] != source_rows(source, gone), f"{gone} changed in the source"
        assert copy.rows(gone) == removed[gone], f"{gone} stopped when it left the set"
