"""Snapshot loads into the PostgreSQL target: consistent, lossless, in parallel key ranges."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from pgshovel.replication.worker import Worker
from pgshovel.source import connect

from ._support import (
    ODD_SCHEMA,
    ODD_TABLE,
    create_type_matrix,
    dump,
    ensure_topic,
    execute,
    set_configuration,
    worker_configuration,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_snapshot_of_type_matrix_with_odd_names_equals_source(
    spark: Any, make_database: Any, kafka_config: dict[str, str], topic: str
) -> None:
    source, target = make_database("source"), make_database("target")
    set_configuration = create_type_matrix(source, rows=3000)
    ensure_topic(kafka_config, topic)
    worker = Worker(
        "test", "set", set_configuration, worker_configuration(target, kafka_config, topic), spark
    )

    state = worker.run(should_stop=lambda: True)

    assert state is not None and state.phase == "streaming"
    source_rows = dump(source, ODD_SCHEMA, ODD_TABLE)
    assert len(source_rows) == 3002
    assert dump(target, ODD_SCHEMA, ODD_TABLE) == source_rows
    assert [report.rows for report in worker.load_reports] == [3002]


def test_writes_during_the_load_do_not_leak_into_the_snapshot(
    spark: Any, make_database: Any, kafka_config: dict[str, str], topic: str
) -> None:
    source, target = make_database("source"), make_database("target")
    execute(
        source,
        "CREATE TABLE events (id bigint PRIMARY KEY, txid bigint NOT NULL DEFAULT txid_current(),"
        " body text);"
        "CREATE TABLE deletions (id bigint, txid bigint NOT NULL DEFAULT txid_current());"
        "INSERT INTO events (id, body) SELECT i, repeat('b', 100) "
        "FROM generate_series(1, 200000) i",
    )
    ensure_topic(kafka_config, topic)
    stop = threading.Event()
    written = [0]

    def write_concurrently() -> None:
        connection = connect(source, "pgshovel-tests")
        next_id = 1_000_000
        while not stop.is_set():
            with connection.cursor() as cursor:
                cursor.execute(
                    "INSERT INTO events (id, body) SELECT i, 'late' FROM generate_series(%s, %s) i",
                    (next_id, next_id + 9),
                )
                cursor.execute(
                    "WITH gone AS (DELETE FROM events WHERE id = %s RETURNING id) "
                    "INSERT INTO deletions (id) SELECT id FROM gone",
                    (written[0] * 7 + 1,),
                )
            connection.commit()
            next_id += 10
            written[0] += 1
        connection.close()

    writer = threading.Thread(target=write_concurrently)
    writer.start()
    try:
        while written[0] < 20:
            time.sleep(0.01)
        worker = Worker(
            "test",
            "set",
            set_configuration(source, [("public", "events")]),
            worker_configuration(target, kafka_config, topic, ranges_per_table=8),
            spark,
        )
        state = worker.run(should_stop=lambda: True)
        during = written[0]
    finally:
        stop.set()
        writer.join()

    assert during > 20, "the writer should have kept writing during the load"
    # What the exported snapshot saw, computed on the source from each row's txid.
    expected = query_all(
        source,
        "SELECT id FROM events WHERE txid_visible_in_snapshot(txid, %s::txid_snapshot) "
        "UNION ALL SELECT id FROM deletions "
        "WHERE NOT txid_visible_in_snapshot(txid, %s::txid_snapshot) ORDER BY 1",
        (state.snapshot, state.snapshot) if state else (),
    )
    loaded = query_all(target, "SELECT id FROM events ORDER BY 1")
    assert loaded == expected
    assert query_all(source, "SELECT count(*) FROM events") != [len(loaded)]


def query_all(dsn: str, statement: str, parameters: tuple[Any, ...] = ()) -> list[Any]:
    connection = connect(dsn, "pgshovel-tests")
    with connection, connection.cursor() as cursor:
        cursor.execute(statement, parameters or None)
        rows = [row[0] for row in cursor.fetchall()]
    connection.close()
    return rows
