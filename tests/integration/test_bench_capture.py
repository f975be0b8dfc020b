"""The capture group's moving parts on the test sandbox: its consumers and the durable switch.

The PgQ consumer thread reads and finishes what was queued, the logical peer
streams from its slot and drops it, and durable commits are turned on and
back off (also when the block fails); ``python -m bench --only capture``
drives them all under pgbench.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from psycopg2.extensions import connection, parse_dsn

from bench._drain import allow_output_plugin, logical_drain, pgq_drain
from bench._durable import durable
from bench._stack import connect_autocommit
from pgshovel.sandbox import SandboxConnection

pytestmark = pytest.mark.integration


def settings(dsn: str) -> tuple[str, str]:
    conn = connect_autocommit(dsn)
    try:
        with conn.cursor() as cursor:
            cursor.execute("SELECT current_setting('fsync'), current_setting('synchronous_commit')")
            row = cursor.fetchone()
    finally:
        conn.close()
    assert row is not None
    return row[0], row[1]


def value(conn: connection, query: str, *arguments: object) -> object:
    with conn.cursor() as cursor:
        cursor.execute(query, arguments)
        row = cursor.fetchone() if cursor.description is not None else None
    return None if row is None else row[0]


def test_durable_commits_are_on_inside_the_block_and_off_after_even_on_errors(
    sandbox: SandboxConnection,
) -> None:
    assert settings(sandbox.postgres_dsn) == ("off", "off")
    with durable(sandbox.postgres_dsn):
        assert settings(sandbox.postgres_dsn) == ("on", "on")
    assert settings(sandbox.postgres_dsn) == ("off", "off")
    with pytest.raises(RuntimeError, match="pgbench broke"), durable(sandbox.postgres_dsn):
        raise RuntimeError("pgbench broke")
    assert settings(sandbox.postgres_dsn) == ("off", "off")


def test_the_pgq_consumer_reads_and_finishes_every_batch(database: str) -> None:
    conn = connect_autocommit(database)
    try:
        value(conn, "CREATE EXTENSION pgq")
        value(conn, "SELECT pgq.create_queue('drained')")
        with pgq_drain(database, "drained") as consumer:
            for number in range(600):  # more than one tick's worth (500 events)
                value(conn, "SELECT pgq.insert_event('drained', 'x', %s)", str(number))
            deadline = time.monotonic() + 30
            while consumer.events < 600 and time.monotonic() < deadline:
                time.sleep(0.05)
        assert consumer.events == 600
        assert consumer.batches >= 1
        assert not consumer.thread.is_alive()
        # Every batch was finished: nothing is left open for the consumer.
        assert (
            value(
                conn, "SELECT count(*) FROM pgq.get_consumer_info() WHERE current_batch IS NOT NULL"
            )
            == 0
        )
    finally:
        conn.close()


def test_the_logical_peer_streams_from_its_slot_and_drops_it(database: str, tmp_path: Path) -> None:
    conn = connect_autocommit(database)
    try:
        allow_output_plugin(conn, parse_dsn(database)["dbname"], "wal2json")
        value(conn, "CREATE TABLE t (id int PRIMARY KEY)")
        log = tmp_path / "pg_recvlogical.log"
        with logical_drain(conn, database, "test_peer", "wal2json", log):
            assert value(
                conn, "SELECT active FROM pg_replication_slots WHERE slot_name = 'test_peer'"
            )
            value(conn, "INSERT INTO t SELECT generate_series(1, 1000)")
            written = value(conn, "SELECT pg_current_wal_lsn()::text")
            deadline = time.monotonic() + 30
            sent = None
            while time.monotonic() < deadline:
                sent = value(
                    conn,
                    "SELECT r.sent_lsn >= %s::pg_lsn FROM pg_stat_replication r"
                    " JOIN pg_replication_slots s ON s.active_pid = r.pid"
                    " WHERE s.slot_name = 'test_peer'",
                    written,
                )
                if sent:
                    break
                time.sleep(0.05)
            assert sent, log.read_text()
        assert (
            value(conn, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'test_peer'")
            == 0
        )
    finally:
        conn.close()


def test_a_consumer_that_fails_while_pgbench_runs_fails_the_run(database: str) -> None:
    conn = connect_autocommit(database)
    try:
        value(conn, "CREATE EXTENSION pgq")
        value(conn, "SELECT pgq.create_queue('dropped')")
        with pytest.raises(RuntimeError, match="the consumer of 'dropped' failed"):
            with pgq_drain(database, "dropped") as consumer:
                value(conn, "SELECT pgq.drop_queue('dropped', true)")
                deadline = time.monotonic() + 30
                while consumer.error is None and time.monotonic() < deadline:
                    time.sleep(0.05)
        assert not consumer.thread.is_alive()
    finally:
        conn.close()
