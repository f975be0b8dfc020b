"""Crash safety: kill -9 the worker (the real CLI) during the snapshot and during streaming.

After each kill a new worker resumes from the state stored in the target; in
the end the target equals the source row for row, nothing applied twice or lost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from pgshovel.sandbox import SandboxConnection
from pgshovel.source import connect
from pgshovel.stream.publisher import Publisher
from tests.stored_state import applied_offset, sole_postgres_state

from ._process import WorkerProcess, wait_for, write_replication_yml
from ._recording import RecordingSource
from ._support import dump, ensure_topic, execute, publish, set_configuration

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

TABLE = ("public", "wide")
ROWS = 250_000


def query_one(dsn: str, statement: str) -> Any:
    connection = connect(dsn, "pgshovel-tests")
    try:
        with connection.cursor() as cursor:
            cursor.execute(statement)
            row = cursor.fetchone()
        connection.rollback()
        return None if row is None else row[0]
    except Exception:
        connection.rollback()
        return None
    finally:
        connection.close()


def test_kill_during_snapshot_and_stream_then_restart_converges(
    sandbox: SandboxConnection,
    make_database: Any,
    kafka_config: dict[str, str],
    topic: str,
    cluster_name: str,
    zookeeper: KazooClient,
    tmp_path: Path,
    worker_processes: list[WorkerProcess],
) -> None:
    source, target = make_database("source"), make_database("target")
    execute(
        source,
        "CREATE TABLE wide (id bigint PRIMARY KEY, name text, amount numeric, at timestamptz);"
        "INSERT INTO wide SELECT i, repeat('x', 40) || i, i / 7.0, now() "
        f"FROM generate_series(1, {ROWS}) AS i",
    )
    configuration = set_configuration(source, [TABLE])
    zookeeper.create(f"/{cluster_name}/sets/set", configuration.SerializeToString(), makepath=True)
    ensure_topic(kafka_config, topic)
    replication_yml = write_replication_yml(
        tmp_path / "replication.yml",
        kafka_config,
        topic,
        {
            "path": "pgshovel.replication.targets.postgresql:PostgresTarget",
            "configuration": {"dsn": target},
        },
    )

    def start() -> WorkerProcess:
        worker = WorkerProcess(
            replication_yml, cluster_name, sandbox.zookeeper_hosts, tmp_path / "worker.log"
        )
        worker_processes.append(worker)
        return worker

    def phase() -> str | None:
        state = sole_postgres_state(target)
        return None if state is None else state.phase

    def offset() -> int | None:
        return applied_offset(sole_postgres_state(target))

    # 1. Killed while ranges are being committed.
    worker = start()
    wait_for(
        lambda: (
            phase() == "snapshot" and query_one(target, "SELECT EXISTS (SELECT FROM wide)") is True
        ),
        "the first snapshot ranges",
        worker,
    )
    worker.kill()
    assert phase() == "snapshot"
    partial = query_one(target, "SELECT count(*) FROM wide")
    assert 0 < partial < ROWS, "the kill should have hit the middle of the load"

    # 2. A new worker empties the tables and loads again; then the stream runs.
    worker = start()
    wait_for(lambda: phase() == "streaming", "the second snapshot", worker)
    assert query_one(target, "SELECT count(*) FROM wide") == ROWS
    recorder = RecordingSource(source, [TABLE])
    publisher = Publisher(epoch=1)
    messages = []
    for batch in range(150):
        for step in range(10):
            key = batch * 10 + step + 1
            recorder.change(
                TABLE,
                "UPDATE wide SET id = id + 1000000, amount = amount * 2 WHERE id = %s",
                (key,),
                old_key=(str(key),),
                new_key=(str(key + 1_000_000),),
            )
        recorder.change(
            TABLE, "DELETE FROM wide WHERE id = %s", (ROWS - batch,), old_key=(str(ROWS - batch),)
        )
        messages += recorder.commit().frame(publisher)
    recorder.close()
    end = len(messages) - 1
    publish(kafka_config, topic, messages)
    wait_for(lambda: (offset() or -1) > end // 4, "a quarter of the stream", worker)
    worker.kill()
    stopped_at = offset()
    assert stopped_at is not None and stopped_at < end, (
        "the kill should have hit the middle of the stream"
    )

    # 3. A new worker resumes from the stored position and converges exactly.
    worker = start()
    wait_for(lambda: offset() == end, "the end of the stream", worker)
    assert worker.stop() == 0
    assert dump(target, *TABLE) == dump(source, *TABLE)
    log = (tmp_path / "worker.log").read_text()
    assert "previous snapshot load did not finish" in log
    assert "rows/s" in log
