"""Provenance end to end: who made each change, from the capture trigger to the set's topic.

Two roles log in with two application names, one over TCP and one over the Unix
socket, and write concurrently to a table captured with provenance and to one
captured without; some transactions switch role with SET LOCAL ROLE, some call a
SECURITY DEFINER function, one sets ``pgshovel.annotation``. The relay is killed
(SIGKILL) once mid-workload and restarted. Every mutation on the topic must then
carry exactly what its statement's session was, and the stream must still replay
to the source table.
"""

from __future__ import annotations

import dataclasses
import random
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import psycopg2
import pytest
from psycopg2 import sql

from pgshovel.protocol import stream_pb2
from pgshovel.sandbox import SandboxConnection
from tests.fix_sandbox import unique_name
from tests.integration.relay._relay import (
    RelayProcess,
    install,
    queue_drained,
    read_topic,
    replay,
    simple,
    topic_of,
    validated,
    wait_for,
    write_relay_yml,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ANNOTATION = "req-42"
TRANSACTIONS = 120


class Expected(NamedTuple):
    """What a statement's mutations must carry."""

    current_user: str
    session_user: str
    application_name: str
    client_addr: str
    annotation: str


class Roles(NamedTuple):
    clerk: str
    auditor: str


@pytest.fixture
def roles(database: str) -> Iterator[Roles]:
    """Two login roles (the clerk may SET ROLE to the auditor), dropped after the test."""
    found = Roles(unique_name("clerk", "_", 30), unique_name("auditor", "_", 30))
    admin = psycopg2.connect(database)
    admin.autocommit = True
    try:
        with admin.cursor() as cursor:
            for role in found:
                cursor.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
            cursor.execute(
                sql.SQL("GRANT {} TO {}").format(
                    sql.Identifier(found.auditor), sql.Identifier(found.clerk)
                )
            )
        yield found
    finally:
        with admin.cursor() as cursor:
            for role in found:
                cursor.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            for role in found:
                cursor.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        admin.close()


def _prepare(database: str, roles: Roles) -> str:
    """Tables, grants, the SECURITY DEFINER function, query ids on; the Unix socket's DSN."""
    admin = psycopg2.connect(database)
    admin.autocommit = True
    try:
        with admin.cursor() as cursor:
            cursor.execute("CREATE TABLE orders (id integer PRIMARY KEY, v integer, by text)")
            cursor.execute("CREATE TABLE plain (id integer PRIMARY KEY, v integer)")
            for role in roles:
                cursor.execute(
                    sql.SQL("GRANT ALL ON orders, plain TO {}").format(sql.Identifier(role))
                )
            # Runs as the auditor whoever calls it.
            cursor.execute(
                "CREATE FUNCTION add_order(key integer) RETURNS void LANGUAGE sql "
                "SECURITY DEFINER SET search_path = public "
                "AS $$ INSERT INTO orders VALUES (key, 0, current_user) $$"
            )
            cursor.execute(
                sql.SQL("ALTER FUNCTION add_order(integer) OWNER TO {}").format(
                    sql.Identifier(roles.auditor)
                )
            )
            cursor.execute(
                "SELECT current_database(), setting FROM pg_settings "
                "WHERE name = 'unix_socket_directories'"
            )
            dbname, sockets = cursor.fetchone()  # type: ignore[misc]
            cursor.execute(
                sql.SQL("ALTER DATABASE {} SET compute_query_id = on").format(
                    sql.Identifier(dbname)
                )
            )
            cursor.execute("SHOW port")
            (port,) = cursor.fetchone()  # type: ignore[misc]
    finally:
        admin.close()
    socket_dir = sockets.split(",")[0].strip()
    return f"host={socket_dir} port={port} dbname={dbname}"


def _writer(
    dsn: str,
    login: str,
    application: str,
    address: str,
    roles: Roles,
    base: int,
    seed: int,
    expected: dict[tuple[int, int], Expected],
    annotate: int | None,
    stop: threading.Event,
    statements: list[int],
) -> None:
    """Transactions on keys base..base+39 (at least TRANSACTIONS, then until ``stop``);
    records each touched key's expectation by txid."""
    rng = random.Random(seed)
    conn = psycopg2.connect(dsn, user=login, application_name=application)
    try:
        number = -1
        while number + 1 < TRANSACTIONS or not stop.is_set():
            number += 1
            time.sleep(0.005)
            touched: list[tuple[int, Expected]] = []
            with conn.cursor() as cursor:
                user = login
                annotation = ""
                if number == annotate:
                    cursor.execute("SET LOCAL pgshovel.annotation = %s", (ANNOTATION,))
                    annotation = ANNOTATION
                keys = rng.sample(range(40), rng.randint(1, 3))  # one statement per key
                for step, offset in enumerate(keys):
                    if login == roles.clerk and step == 1 and rng.random() < 0.5:
                        # The role changes inside the transaction: per statement.
                        cursor.execute(
                            sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(roles.auditor))
                        )
                        user = roles.auditor
                    now = Expected(user, login, application, address, annotation)
                    key = base + offset
                    choice = 0.3 if number == annotate else rng.random()
                    if choice < 0.15:
                        cursor.execute("SELECT count(*) FROM orders WHERE id = %s", (key,))
                        if cursor.fetchone() == (0,):
                            cursor.execute("SELECT add_order(%s)", (key,))
                            touched.append((key, now))
                    elif choice < 0.55:
                        cursor.execute(
                            "INSERT INTO orders VALUES (%s, 1, current_user) ON CONFLICT (id)"
                            " DO UPDATE SET v = orders.v + 1, by = current_user",
                            (key,),
                        )
                        touched.append((key, now))
                    elif choice < 0.8:
                        cursor.execute("DELETE FROM orders WHERE id = %s", (key,))
                        if cursor.rowcount:
                            touched.append((key, now))
                    else:
                        cursor.execute(
                            "INSERT INTO plain VALUES (%s, 1) ON CONFLICT (id)"
                            " DO UPDATE SET v = plain.v + 1",
                            (key,),
                        )
                if rng.random() < 0.3:
                    # One statement over several rows: its events after the first refer
                    # to the first's provenance, with the other writer's events between.
                    cursor.execute(
                        "UPDATE orders SET v = v + 1, by = current_user WHERE id = ANY(%s)"
                        " RETURNING id",
                        ([base + offset for offset in range(40) if offset not in keys],),
                    )
                    now = Expected(user, login, application, address, annotation)
                    found = cursor.fetchall()
                    touched.extend((key, now) for (key,) in found)
                    statements.append(len(found))
                cursor.execute("SELECT txid_current()")
                (txid,) = cursor.fetchone()  # type: ignore[misc]
            conn.commit()
            for key, now in touched:
                expected[(txid, key)] = now
    finally:
        conn.close()


def _orders(dsn: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cursor:
            cursor.execute("SELECT id, v, by FROM orders")
            return {(i,): {"id": i, "v": v, "by": b} for i, v, b in cursor.fetchall()}
    finally:
        conn.close()


def test_each_mutation_carries_who_made_it(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    kafka_config: dict[str, str],
    roles: Roles,
    tmp_path: Path,
) -> None:
    socket_dsn = _prepare(database, roles)
    install(
        zookeeper,
        cluster_name,
        database,
        [{"name": "orders", "provenance": True}, {"name": "plain"}],
    )
    expected: dict[tuple[int, int], Expected] = {}
    errors: list[BaseException] = []
    stop = threading.Event()
    statements: list[int] = []  # rows of each multi-row UPDATE

    def write(*arguments: Any) -> None:
        try:
            _writer(*arguments)
        except BaseException as error:  # reported by the test thread
            errors.append(error)
            raise

    writers = [
        threading.Thread(
            target=write,
            args=(
                database,
                roles.clerk,
                "till-a",
                "127.0.0.1",
                roles,
                0,
                1,
                expected,
                30,
                stop,
                statements,
            ),
        ),
        threading.Thread(
            target=write,
            args=(
                socket_dsn,
                roles.auditor,
                "till-b",
                "",
                roles,
                1000,
                2,
                expected,
                None,
                stop,
                statements,
            ),
        ),
    ]
    config = write_relay_yml(tmp_path, sandbox)
    relay = RelayProcess(sandbox, cluster_name, config, tmp_path / "relay0.log")
    try:
        for writer in writers:
            writer.start()
        wait_for(lambda: "batch " in relay.output(), 60, "a published batch", relay.output)
        assert all(writer.is_alive() for writer in writers), errors  # killed mid-workload
        relay.kill()  # kill -9
        relay = RelayProcess(sandbox, cluster_name, config, tmp_path / "relay1.log")
        wait_for(lambda: "batch " in relay.output(), 60, "the restarted relay's first batch")
        stop.set()
        for writer in writers:
            writer.join()
        assert not errors, errors
        wait_for(lambda: queue_drained(database, cluster_name), 90, "the relay to drain the queue")
    finally:
        stop.set()
        for writer in writers:
            if writer.ident is not None:
                writer.join()
        status = relay.stop()
    assert status == 0, relay.output()
    batches = validated(read_topic(kafka_config, topic_of(cluster_name)))
    mutations = [m for batch in batches for m in batch.mutations]
    stamped = [m for m in mutations if m.table == "orders"]
    plain = [m for m in mutations if m.table == "plain"]
    assert plain and not any(m.HasField("provenance") for m in plain)
    assert len(stamped) == len(expected)
    assert max(statements) > 1  # statements whose later events held a reference
    annotated = set()
    users = set()
    definer_calls = 0
    for mutation in stamped:
        row = simple(mutation.new if mutation.HasField("new") else mutation.old)
        want = expected[(mutation.transaction, row["id"])]
        got = mutation.provenance
        assert mutation.HasField("provenance")
        assert (
            got.current_user,
            got.session_user,
            got.application_name,
            got.client_addr,
            got.annotation,
        ) == tuple(want), (mutation.transaction, row)
        assert got.query_id != 0
        if mutation.operation != stream_pb2.Mutation.DELETE and row["by"] != want.current_user:
            # The row's "by" is current_user inside the statement: the SECURITY DEFINER
            # function's owner there, while the stamp names the role that called it.
            assert row["by"] == roles.auditor and want.current_user == roles.clerk
            definer_calls += 1
        users.add((got.current_user, got.session_user))
        if got.annotation:
            annotated.add(mutation.transaction)
    # Both logins, and the clerk acting as the auditor after SET LOCAL ROLE.
    assert users == {
        (roles.clerk, roles.clerk),
        (roles.auditor, roles.clerk),
        (roles.auditor, roles.auditor),
    }
    assert definer_calls > 0
    # The annotation is on exactly the mutations of the one transaction that set it.
    annotated_expected = {txid for (txid, _), want in expected.items() if want.annotation}
    assert annotated == annotated_expected and len(annotated) == 1
    # The copy is still exact.
    only_orders = [
        dataclasses.replace(
            batch, mutations=tuple(m for m in batch.mutations if m.table == "orders")
        )
        for batch in batches
    ]
    assert replay(only_orders) == _orders(database)


def _peak_rss_mb(pid: int) -> float:
    """The process's peak resident set size (``VmHWM``), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for pid {pid}")


def test_a_large_annotation_travels_once_per_transaction(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
) -> None:
    """A 200 KB annotation on a 3,000-row UPDATE: the batch costs the annotation about once
    on Kafka (the relay sent it with every row: ~600 MB, and grew to 1.2 GB); every mutation
    still reads back with it."""
    rows, size = 3_000, 200_000
    annotation = "".join(random.Random(5).choice("abcdefghij") for _ in range(size))
    connection = psycopg2.connect(database)
    try:
        with connection, connection.cursor() as cursor:
            cursor.execute("CREATE TABLE bulk (id integer PRIMARY KEY, v integer NOT NULL)")
            cursor.execute("INSERT INTO bulk SELECT n, 0 FROM generate_series(1, %s) n", (rows,))
        install(zookeeper, cluster_name, database, [{"name": "bulk", "provenance": True}])
        relay = RelayProcess(
            sandbox, cluster_name, write_relay_yml(tmp_path, sandbox), tmp_path / "relay.log"
        )

        # (queue_drained can answer before a long transaction's events are published: a
        # tick taken while it ran already counts them.)
        def published(count: int) -> bool:
            sizes = re.findall(r"batch \d+: (\d+) events", relay.output())
            return sum(int(size) >= rows for size in sizes) >= count

        try:
            with connection, connection.cursor() as cursor:
                cursor.execute("UPDATE bulk SET v = v + 1")
            wait_for(lambda: published(1), 90, "the plain update", relay.output)
            with connection, connection.cursor() as cursor:
                cursor.execute("SET LOCAL pgshovel.annotation = %s", (annotation,))
                cursor.execute("UPDATE bulk SET v = v + 1")
            wait_for(lambda: published(2), 90, "the annotated update", relay.output)
            peak = _peak_rss_mb(relay.pid)
        finally:
            assert relay.stop() == 0, relay.output()
    finally:
        connection.close()
    messages = read_topic(kafka_config, topic_of(cluster_name))
    sent: dict[int, int] = {}  # batch id -> bytes on Kafka
    for _, message in messages:
        batch = message.operation.batch.id
        sent[batch] = sent.get(batch, 0) + message.ByteSize()
    batches = [b for b in validated(messages) if b.mutations]
    assert len(batches) == 2, [(b.batch_id, len(b.mutations)) for b in batches]
    plain, annotated = batches
    assert [len(plain.mutations), len(annotated.mutations)] == [rows, rows]
    # Every mutation reads back with its provenance (the validator resolves the references).
    assert all(m.provenance.annotation == annotation for m in annotated.mutations)
    assert not any(m.provenance.annotation for m in plain.mutations)
    copied = sum(m.ByteSize() for m in annotated.mutations)  # what the relay used to send
    print(
        f"\n3,000-row UPDATE with a 200 KB annotation: {sent[annotated.batch_id]:,} bytes to "
        f"kafka (without annotation {sent[plain.batch_id]:,}; one copy per row would be "
        f"{copied:,}); relay peak RSS {peak:.0f} MiB"
    )
    assert sent[annotated.batch_id] <= sent[plain.batch_id] + 2 * size
    assert peak < 400, f"relay peak RSS {peak:.0f} MiB"
