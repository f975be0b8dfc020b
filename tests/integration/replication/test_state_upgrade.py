"""A target's state written by 0.2 (or 0.1) is upgraded in place, and the worker streams on.

PostgreSQL: the old table and row are written with the release's own SQL
(``_old_state``); the new code converts them to one ``state`` document on
first open, in one transaction, once even when two workers start together, and
a worker resumes
at the same position without loading the tables again. A stored state that was
tampered with stops the worker with one line naming the field and the reload
statement, and that statement, run, gets the copy back. Parquet: a directory
with 0.2's file names and state file (and what a crash of 0.2 left behind) is
read through its state, cleaned once, and continued with names by commit.
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from pgshovel.errors import StateError
from pgshovel.replication.targets import _parquet_state, _pgstate
from pgshovel.replication.targets.parquet import ParquetTarget, change_files, read_current_text
from pgshovel.replication.targets.postgresql import PostgresTarget
from pgshovel.replication.worker import Worker
from pgshovel.source import connect
from pgshovel.stream.position import PartitionCursor, StreamPosition
from pgshovel.stream.publisher import Publisher
from pgshovel.stream.state import WorkerState
from tests.stored_state import applied_offset, parquet_state, postgres_state

from ._old_state import make_parquet_directory_old, write_old_state
from ._recording import RecordingSource
from ._support import (
    dump,
    ensure_topic,
    execute,
    publish,
    set_configuration,
    worker_configuration,
)
from ._workload import ITEMS, ITEMS_DDL, random_items_stream
from .test_parquet import source_rows, spark_rows
from .test_stream import until_offset

pytestmark = [pytest.mark.integration]

CLUSTER, SET = "test", "set"
NODE = bytes(range(16))


def columns(dsn: str) -> list[str]:
    connection = connect(dsn, "pgshovel-tests")
    with connection, connection.cursor() as cursor:
        cursor.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = "
            "'pgshovel_replication.worker_state'::regclass AND attnum > 0 AND NOT attisdropped "
            "ORDER BY attnum"
        )
        names = [name for (name,) in cursor.fetchall()]
    connection.close()
    return names


@pytest.mark.spark
def test_a_state_of_0_2_is_upgraded_and_the_worker_streams_on_without_a_reload(
    spark: Any, make_database: Any, kafka_config: dict[str, str], topic: str
) -> None:
    source, target = make_database("source"), make_database("target")
    execute(source, ITEMS_DDL)
    configuration = set_configuration(source, [ITEMS])
    ensure_topic(kafka_config, topic)
    Worker(
        CLUSTER, SET, configuration, worker_configuration(target, kafka_config, topic), spark
    ).run(lambda: True)
    publisher = Publisher(epoch=1)
    recorder = RecordingSource(source, [ITEMS])
    messages, _ = random_items_stream(recorder, publisher, batches=12, per_batch=5, seed=1)
    recorder.close()
    commits = [i for i, message in enumerate(messages) if message.operation.HasField("commit")]
    first, rest = messages[: commits[5] + 1], messages[commits[5] + 1 :]
    publish(kafka_config, topic, first)
    Worker(
        CLUSTER, SET, configuration, worker_configuration(target, kafka_config, topic), spark
    ).run(until_offset(target, len(first) - 1))
    before = postgres_state(target, CLUSTER, SET)
    assert before is not None and applied_offset(before) == len(first) - 1

    # The target as 0.2 left it at that position.
    write_old_state(target, CLUSTER, SET, before, release="0.2")
    assert "state" not in columns(target)

    publish(kafka_config, topic, rest)
    worker = Worker(
        CLUSTER, SET, configuration, worker_configuration(target, kafka_config, topic), spark
    )
    worker.run(until_offset(target, len(first) + len(rest) - 1))
    assert worker.load_reports == [], "the worker loaded the tables again instead of resuming"
    assert columns(target) == ["cluster", "set_name", "updated_at", "state"]
    after = postgres_state(target, CLUSTER, SET)
    assert after is not None and applied_offset(after) == len(first) + len(rest) - 1
    assert after.position.last_batch(NODE) == 12 and after.tables == before.tables
    assert dump(target, *ITEMS) == dump(source, *ITEMS)
    # Read-your-writes reads the new layout.
    connection = connect(target, "pgshovel-tests")
    with connection, connection.cursor() as cursor:
        cursor.execute("SELECT pgshovel_replication.applied(1, %s)", (SET,))
        assert cursor.fetchone() == (True,)
        # Tampered with: one line naming the field and the statement that reloads.
        cursor.execute(
            "UPDATE pgshovel_replication.worker_state "
            "SET state = jsonb_set(state, '{tasks}', '{\"t\": []}')"
        )
    connection.close()
    with pytest.raises(StateError, match=r"field 'tasks': expected a list, got an object") as got:
        Worker(
            CLUSTER, SET, configuration, worker_configuration(target, kafka_config, topic), spark
        ).run(lambda: True)
    statement = str(got.value).split("run ", 1)[1].split(" on the target")[0]
    execute(target, statement)
    execute(source, "UPDATE \"Items\" SET payload = 'after the reload'")
    reloaded = Worker(
        CLUSTER, SET, configuration, worker_configuration(target, kafka_config, topic), spark
    )
    reloaded.run(lambda: True)
    assert reloaded.load_reports, "the statement the error names makes the worker load afresh"
    assert dump(target, *ITEMS) == dump(source, *ITEMS)


STATE = WorkerState(
    "streaming",
    "100:100:",
    StreamPosition((PartitionCursor(42, bytes(range(16, 32)), 7, 3),), ((NODE, 12),)),
    horizon="120:121:",
)


def open_target(dsn: str, set_name: str = SET) -> WorkerState | None:
    target = PostgresTarget(dsn)
    try:
        return target.open(CLUSTER, set_name)
    finally:
        target.close()


@pytest.mark.parametrize("release", ["0.1", "0.2"])
def test_a_state_table_of_an_earlier_release_reads_as_the_same_state(
    database: str, release: str
) -> None:
    write_old_state(database, CLUSTER, SET, STATE, release=release)
    upgraded = open_target(database)
    assert upgraded == (STATE if release == "0.2" else STATE.replace(horizon=""))
    assert "state" in columns(database) and "position_offset" not in columns(database)


def test_two_workers_starting_together_convert_the_table_once(database: str) -> None:
    write_old_state(database, CLUSTER, SET, STATE)
    connection = connect(database, "pgshovel-tests")
    with connection, connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO pgshovel_replication.worker_state (cluster, set_name, phase, snapshot, "
            "start_offset) VALUES (%s, 'other', 'streaming', '200:200:', 42)",
            (CLUSTER,),
        )
    connection.close()
    results: dict[str, Any] = {}
    barrier = threading.Barrier(2)

    def start(set_name: str) -> None:
        barrier.wait()
        try:
            results[set_name] = open_target(database, set_name)
        except Exception as error:  # reported below
            results[set_name] = error

    threads = [threading.Thread(target=start, args=(name,)) for name in (SET, "other")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert results == {
        SET: STATE,
        "other": WorkerState("streaming", "200:200:", StreamPosition.start((42,))),
    }
    assert columns(database) == ["cluster", "set_name", "updated_at", "state"]


def test_an_upgrade_killed_midway_leaves_the_old_table(database: str) -> None:
    """The conversion runs in the open's one transaction: ended before its commit (a killed
    worker), nothing of it remains, and the next open converts."""
    write_old_state(database, CLUSTER, SET, STATE)
    connection = connect(database, "pgshovel-tests")
    with connection.cursor() as cursor:
        _pgstate.create(cursor)
        assert "state" in columns_in(cursor)
    connection.close()  # without commit: what a kill -9 leaves
    assert "position_offset" in columns(database) and "state" not in columns(database)
    assert open_target(database) == STATE


def columns_in(cursor: Any) -> list[str]:
    cursor.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = "
        "'pgshovel_replication.worker_state'::regclass AND attnum > 0 AND NOT attisdropped"
    )
    return [name for (name,) in cursor.fetchall()]


def test_a_tampered_state_names_the_field_and_the_reload_statement(database: str) -> None:
    target = PostgresTarget(database)
    target.open(CLUSTER, SET)
    target.store_state(STATE)
    target.close()
    connection = connect(database, "pgshovel-tests")
    with connection, connection.cursor() as cursor:
        cursor.execute(
            "UPDATE pgshovel_replication.worker_state "
            "SET state = jsonb_set(state, '{position,committed}', '{\"a\": 1}')"
        )
    connection.close()
    with pytest.raises(StateError) as raised:
        open_target(database)
    message = str(raised.value)
    assert "\n" not in message
    assert "field 'position.committed': expected a list, got an object" in message
    assert "the target must be reloaded: run DELETE FROM" in message
    statement = message.split("run ", 1)[1].split(" on the target")[0]
    with psycopg2.connect(database) as reload, reload.cursor() as cursor:
        cursor.execute(statement)
    reload.close()
    assert open_target(database) is None, "after the statement the worker loads afresh"


@pytest.mark.spark
def test_a_parquet_directory_of_0_2_is_upgraded_and_the_worker_streams_on(
    spark: Any, make_database: Any, kafka_config: dict[str, str], topic: str, tmp_path: Path
) -> None:
    source, output = make_database("source"), tmp_path / "parquet"
    execute(source, ITEMS_DDL)
    configuration = set_configuration(source, [ITEMS])
    ensure_topic(kafka_config, topic)

    def run(until: Any) -> Worker:
        worker = Worker(
            CLUSTER,
            SET,
            configuration,
            worker_configuration("", kafka_config, topic, target=ParquetTarget(str(output))),
            spark,
        )
        worker.run(until)
        return worker

    def parquet_offset() -> int:
        offset = applied_offset(parquet_state(output))
        return -1 if offset is None else offset

    run(lambda: True)
    recorder = RecordingSource(source, [ITEMS])
    messages, _ = random_items_stream(recorder, Publisher(epoch=1), batches=12, per_batch=5, seed=3)
    recorder.close()
    commits = [i for i, message in enumerate(messages) if message.operation.HasField("commit")]
    first, rest = messages[: commits[5] + 1], messages[commits[5] + 1 :]
    publish(kafka_config, topic, first)
    run(lambda: parquet_offset() >= len(first) - 1)
    stored = _parquet_state.read(output)
    assert stored is not None and applied_offset(stored.state) == len(first) - 1

    # The directory as 0.2 left it, with what a crash of 0.2 left behind after its last commit.
    make_parquet_directory_old(output, stored.state, stored.versions)
    changes = output / ITEMS[0] / ITEMS[1] / "changes"
    committed_before = sorted(changes.glob("*.parquet"))
    assert committed_before and all(not log.name.startswith("v") for log in committed_before)
    leftover = changes / f"{len(first) + 5:020d}-0000.parquet"
    shutil.copy(committed_before[-1], leftover)
    stale = output / ITEMS[0] / ITEMS[1] / "current" / f"{len(first) + 5:020d}-0000"
    shutil.copytree(next(stale.parent.iterdir()), stale)
    assert change_files(str(output), *ITEMS) == [str(log) for log in committed_before]

    publish(kafka_config, topic, rest)
    worker = run(lambda: parquet_offset() >= len(messages) - 1)
    assert worker.load_reports == [], "the worker loaded the tables again instead of resuming"
    assert not leftover.exists() and not stale.exists()
    assert json.loads((output / "_state.json").read_text())["format"] == 2
    logs = change_files(str(output), *ITEMS)
    assert logs[: len(committed_before)] == [str(log) for log in committed_before]
    assert logs[len(committed_before) :] and all(
        Path(log).name.startswith("v") for log in logs[len(committed_before) :]
    )
    assert sorted(read_current_text(str(output), *ITEMS), key=repr) == source_rows(source, *ITEMS)
    assert spark_rows(spark, str(output), *ITEMS) == source_rows(source, *ITEMS)
