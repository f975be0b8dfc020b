"""The Parquet target: change log and current state after a kill -9 and a restart."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from psycopg2 import sql

from pgshovel.replication import catalog
from pgshovel.replication.targets.parquet import read_changes, read_current
from pgshovel.sandbox import SandboxConnection
from pgshovel.source import connect
from pgshovel.source.copytext import decode_line
from pgshovel.stream.publisher import Publisher
from tests.stored_state import applied_offset, parquet_state, phase_and_offset

from ._parquet_read import spark_texts
from ._process import WorkerProcess, wait_for, write_replication_yml
from ._recording import RecordingSource
from ._support import ODD_SCHEMA, ODD_TABLE, create_type_matrix, ensure_topic, execute, publish
from ._support import set_configuration as make_set
from ._workload import ITEMS, ITEMS_DDL, random_items_stream

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

MATRIX = (ODD_SCHEMA, ODD_TABLE)


def source_rows(dsn: str, schema: str, table: str) -> list[tuple[str | None, ...]]:
    """The source rows as PostgreSQL prints them (COPY text), sorted."""
    connection = connect(dsn, "pgshovel-tests")
    configuration = make_set(dsn, [(schema, table)])
    shape = catalog.set_shapes(connection, configuration)[0]
    buffer = io.BytesIO()
    with connection.cursor() as cursor:
        cursor.copy_expert(
            sql.SQL("COPY {} ({}) TO STDOUT")
            .format(
                sql.Identifier(schema, table),
                sql.SQL(", ").join(sql.Identifier(name) for name in shape.column_names),
            )
            .as_string(cursor),
            buffer,
        )
    connection.close()
    return sorted((decode_line(line) for line in buffer.getvalue().decode().splitlines()), key=repr)


def spark_rows(spark: Any, path: str, schema: str, table: str) -> list[tuple[str | None, ...]]:
    """The current rows read back with Spark, every value as PostgreSQL's text, sorted."""
    return sorted(
        spark_texts(spark, read_current(spark, path, schema, table), path, schema, table), key=repr
    )


def stored_offset(path: Path) -> int:
    offset = applied_offset(parquet_state(path))
    return -1 if offset is None else offset


def test_change_log_and_current_state_survive_kill_and_restart(
    spark: Any,
    sandbox: SandboxConnection,
    make_database: Any,
    kafka_config: dict[str, str],
    topic: str,
    cluster_name: str,
    zookeeper: KazooClient,
    tmp_path: Path,
    worker_processes: list[WorkerProcess],
) -> None:
    source = make_database("source")
    create_type_matrix(source, rows=2000)
    execute(source, ITEMS_DDL)
    configuration = make_set(source, [ITEMS, MATRIX])
    zookeeper.create(f"/{cluster_name}/sets/set", configuration.SerializeToString(), makepath=True)
    ensure_topic(kafka_config, topic)
    output = tmp_path / "parquet"
    replication_yml = write_replication_yml(
        tmp_path / "replication.yml",
        kafka_config,
        topic,
        {
            "path": "pgshovel.replication.targets.parquet:ParquetTarget",
            "configuration": {"path": str(output)},
        },
        max_batch_messages=25,
        # A read of 25 messages ends inside a 10-message batch wherever it starts, and a part
        # is taken from two mutations on: batches are applied in parts whatever the fetch sizes.
        part_mutations=2,
    )

    def start() -> WorkerProcess:
        worker = WorkerProcess(
            replication_yml, cluster_name, sandbox.zookeeper_hosts, tmp_path / "worker.log"
        )
        worker_processes.append(worker)
        return worker

    worker = start()
    wait_for(
        lambda: (phase_and_offset(parquet_state(output)) or ("", None))[0] == "streaming",
        "the snapshot",
        worker,
    )
    assert spark_rows(spark, str(output), *MATRIX) == source_rows(source, *MATRIX)

    recorder = RecordingSource(source, [ITEMS, MATRIX])
    messages, mutations = random_items_stream(
        recorder, Publisher(epoch=1), batches=120, per_batch=8, seed=7, truncate_at=50
    )
    recorder.close()
    publish(kafka_config, topic, messages)
    end = len(messages) - 1
    wait_for(lambda: stored_offset(output) > end // 3, "a third of the stream", worker)
    worker.kill()
    assert stored_offset(output) < end, "the kill should have hit the middle of the stream"

    worker = start()
    wait_for(lambda: stored_offset(output) == end, "the end of the stream", worker)
    assert worker.stop() == 0
    assert "applied part 1 of batch" in (tmp_path / "worker.log").read_text()

    changes = read_changes(spark, str(output), *ITEMS)
    assert changes is not None
    assert changes.count() == mutations
    assert changes.select("batch_id", "mutation_id").distinct().count() == mutations
    operations = {row["operation"] for row in changes.select("operation").distinct().collect()}
    assert operations == {"INSERT", "UPDATE", "DELETE", "TRUNCATE"}
    assert spark_rows(spark, str(output), *ITEMS) == source_rows(source, *ITEMS)
    assert spark_rows(spark, str(output), *MATRIX) == source_rows(source, *MATRIX)
