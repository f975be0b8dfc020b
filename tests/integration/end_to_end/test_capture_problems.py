"""DDL that changes rows unseen, or stops capture, ends with a copy equal to the source.

One relay and one worker (PostgreSQL target) follow a source while it is
changed the ways a hostile review found the copy left wrong: a type change with
USING run by a migration function, a column of a domain whose default is
volatile, an enum label renamed, writes through an inheritance parent that
change its child's rows. Then capture stops three ways: the set's triggers
disabled, a table dropped and created again, its primary key moved. The relay
stops at each with an error naming the table and the remedy; the test runs each
remedy as written (the ``ENABLE TRIGGER`` statements, ``pgshovel-admin set
update``), starts the relay again, and every copy ends equal to its source
table's own rows (``set verify`` agrees for the inheritance tree).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from kazoo.client import KazooClient
from psycopg2 import sql

from pgshovel.sandbox import SandboxConnection
from tests.integration.admin._admin import admin, ok, write_set
from tests.integration.capture._capture import SET, install
from tests.integration.relay._relay import RelayProcess, topic_of, write_relay_yml

from ._stack import WorkerProcess, wait_caught_up, wait_until, write_replication_yml
from ._targets import POSTGRES, postgres_progress, source_columns

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]

TYPES = """
CREATE TYPE mood AS ENUM ('sad', 'ok');
CREATE DOMAIN stamp AS timestamptz DEFAULT clock_timestamp();
"""

SCHEMA = """
CREATE TABLE vals (id int PRIMARY KEY, v int NOT NULL, w int, m mood);
CREATE TABLE parent (id int PRIMARY KEY, n int);
CREATE TABLE child (PRIMARY KEY (id)) INHERITS (parent);
CREATE TABLE quiet (id int PRIMARY KEY, n int);
CREATE TABLE gone (id int PRIMARY KEY, n int);
CREATE TABLE keyed (id int PRIMARY KEY, code text NOT NULL, n int);
INSERT INTO vals SELECT g, g, g, CASE WHEN g % 2 = 0 THEN 'sad' ELSE 'ok' END::mood
    FROM generate_series(1, 200) g;
INSERT INTO parent SELECT g, g FROM generate_series(1, 100) g;
INSERT INTO child SELECT g, g FROM generate_series(1001, 1100) g;
INSERT INTO quiet SELECT g, g FROM generate_series(1, 100) g;
INSERT INTO gone SELECT g, g FROM generate_series(1, 100) g;
INSERT INTO keyed SELECT g, 'c' || g, g FROM generate_series(1, 100) g;
CREATE FUNCTION migrate() RETURNS void LANGUAGE plpgsql AS $$ BEGIN
    ALTER TABLE vals ALTER COLUMN v TYPE int USING v * 10;
    ALTER TABLE vals ALTER COLUMN w TYPE bigint USING w * 10;
END $$;
"""

TABLES = ("vals", "parent", "child", "quiet", "gone", "keyed")


def run(dsn: str, statement: str) -> None:
    connection = psycopg2.connect(dsn)
    try:
        with connection, connection.cursor() as cursor:
            cursor.execute(statement)
    finally:
        connection.close()


def own_rows(dsn: str, table: str) -> list[str]:
    """The table's own rows (not its children's) as JSON, sorted."""
    connection = psycopg2.connect(dsn)
    try:
        with connection, connection.cursor() as cursor:
            cursor.execute(
                sql.SQL("SELECT to_jsonb(t)::text FROM ONLY {} AS t").format(
                    sql.Identifier("public", table)
                )
            )
            found = sorted(json.dumps(json.loads(row[0]), sort_keys=True) for row in cursor)
    finally:
        connection.close()
    return found


def test_hidden_row_changes_reach_the_copy_and_stopped_capture_stops_the_relay_until_remedied(
    sandbox: SandboxConnection,
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: list[Any],
) -> None:
    source, target = make_database("source"), make_database("target")
    run(source, TYPES + SCHEMA)
    # The target's own types, as the README asks: the new label is there before the
    # rename, and the domain's default would give the copy its own values.
    run(target, TYPES + "ALTER TYPE mood ADD VALUE 'blue';")
    set_file = write_set(tmp_path, source, [{"name": name} for name in TABLES])
    install(zookeeper, cluster_name, source, [{"name": name} for name in TABLES])
    configuration = write_replication_yml(
        tmp_path / "replication.yml",
        kafka_config,
        topic_of(cluster_name),
        {"path": POSTGRES, "configuration": {"dsn": target}},
    )
    relay_yml = write_relay_yml(tmp_path, sandbox)
    counter = iter(range(1, 100))

    def start_relay() -> RelayProcess:
        relay = RelayProcess(
            sandbox, cluster_name, relay_yml, tmp_path / f"relay-{next(counter)}.log"
        )
        processes.append(relay)
        return relay

    def stopped_with(relay: RelayProcess, *words: str) -> str:
        """The one error line of a relay that stopped at a problem; it names ``words``."""
        wait_until(lambda: not relay.alive(), "the relay to stop at the problem", 120)
        errors = [line for line in relay.output().splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and all(word in errors[0] for word in words), relay.output()
        return errors[0]

    relay = start_relay()
    worker = WorkerProcess(sandbox, cluster_name, configuration, tmp_path / "worker.log")
    processes.append(worker)

    wait_until(
        lambda: postgres_progress(target, cluster_name)[0] is not None,
        "the worker to stream",
        240,
        worker.alive,
        worker.output,
    )

    # Row changes no row event shows: the copy must read the tables again.
    run(source, "SELECT migrate()")
    run(source, "ALTER TABLE vals ADD COLUMN at stamp")
    run(source, "ALTER TYPE mood RENAME VALUE 'sad' TO 'blue'")
    # Writes through the parent change its child's rows (the child's triggers capture them).
    run(source, "UPDATE parent SET n = n + 1000 WHERE id % 3 = 0")
    run(source, "DELETE FROM parent WHERE id % 7 = 0")
    run(source, "INSERT INTO child VALUES (1500, 1), (1501, 2)")

    # Capture stops: the set's triggers disabled. The relay stops, naming the remedy.
    run(source, "ALTER TABLE quiet DISABLE TRIGGER ALL")
    run(source, "UPDATE quiet SET n = n + 1 WHERE id <= 10")
    error = stopped_with(relay, "'public'.'quiet'", "is disabled")
    enable = re.search(r"enable them \((.*)\), after which", error)
    assert enable is not None, error
    run(source, enable.group(1))

    # Capture stops: a table dropped and created again, a primary key moved.
    run(source, "DROP TABLE gone")
    run(source, "CREATE TABLE gone (id int PRIMARY KEY, n int)")
    run(source, "INSERT INTO gone SELECT g, -g FROM generate_series(1, 50) g")
    run(source, "ALTER TABLE keyed DROP CONSTRAINT keyed_pkey, ADD PRIMARY KEY (code)")
    run(source, "UPDATE keyed SET n = -n WHERE id <= 10")
    relay = start_relay()
    stopped_with(relay, "'public'.'gone'", "created again", f"set update {SET} FILE")
    ok(admin(sandbox, cluster_name, "set", "update", SET, set_file))
    run(source, "INSERT INTO gone VALUES (99, 99)")
    run(source, "UPDATE keyed SET n = 0 WHERE code = 'c50'")
    relay = start_relay()

    def caught_up() -> None:
        wait_caught_up(
            source,
            cluster_name,
            kafka_config,
            topic_of(cluster_name),
            lambda: postgres_progress(target, cluster_name)[0],
            worker.alive,
            worker.output,
            timeout=240,
        )

    caught_up()
    wait_until(
        lambda: postgres_progress(target, cluster_name)[1] == 0,
        "the worker to copy again what DDL rewrote and what capture missed",
        300,
        worker.alive,
        worker.output,
    )
    caught_up()
    # set verify compares each table's own rows too: the parent's copy verifies.
    verified = ok(
        admin(sandbox, cluster_name, "set", "verify", SET, "--timeout", "110", "parent", "child")
    )
    assert verified.count("no difference") == 2, verified
    assert worker.stop() == 0, worker.output()[-3000:]
    assert relay.stop() == 0, relay.output()[-3000:]

    assert [name for name, _ in source_columns(source, "vals")] == ["id", "v", "w", "m", "at"]
    assert source_columns(target, "vals") == source_columns(source, "vals")
    for table in TABLES:
        assert own_rows(target, table) == own_rows(source, table), table
    log = worker.output()
    assert "table 'public'.'quiet' is no longer replicated" in log
    assert "table 'public'.'gone' is no longer replicated" in log
