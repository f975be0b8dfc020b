"""End to end into Parquet: current state equals the source, change log one row per mutation.

The same concurrent workload as the PostgreSQL test, with the real relay and
``pgshovel-replicate`` writing the Parquet target. Read back with pyarrow
through the target's committed state: each table's current rows equal the
source's (typed as the target types them), and the change log holds exactly
the committed mutations the snapshot did not already contain, each once.
"""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from kazoo.client import KazooClient
from psycopg2 import sql

from pgshovel.protocol import configuration_pb2
from pgshovel.replication import catalog
from pgshovel.replication.targets.parquet import change_files, read_current_text
from pgshovel.sandbox import SandboxConnection
from pgshovel.source import TableShape, connect
from pgshovel.source.copytext import decode_line
from tests.integration.relay._relay import read_topic, validated
from tests.stored_state import parquet_state as stored_state

from ._scenario import Processes, Scenario
from ._schema import MATRIX, ODD, PAIRS, Table
from ._stack import parquet_state, wait_until, write_replication_yml
from ._workload import Workload

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]

TABLES = (ODD, PAIRS, MATRIX)


def comparable(value: Any) -> Any:
    """Floats by their text (NaN equals NaN, -0 differs from 0)."""
    return repr(value) if isinstance(value, float) else value


def shape_of(dsn: str, table: Table) -> TableShape:
    configuration = configuration_pb2.ReplicationSetConfiguration()
    configuration.tables.add(schema=table.schema, name=table.name)
    connection = connect(dsn, "pgshovel-tests")
    try:
        return catalog.set_shapes(connection, configuration)[0]
    finally:
        connection.close()


def keyed(shape: TableShape, rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    by_key = {
        tuple(row[name] for name in shape.key): tuple(
            comparable(row[name]) for name in shape.column_names
        )
        for row in rows
    }
    assert len(by_key) == len(rows), f"{shape.qualified}: duplicate keys"
    return by_key


def source_rows(dsn: str, shape: TableShape) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """The source rows as PostgreSQL prints them (COPY text), by key."""
    buffer = io.BytesIO()
    connection = connect(dsn, "pgshovel-tests")
    try:
        with connection.cursor() as cursor:
            copy = sql.SQL("COPY {} ({}) TO STDOUT").format(
                sql.Identifier(shape.schema, shape.name),
                sql.SQL(", ").join(sql.Identifier(name) for name in shape.column_names),
            )
            cursor.copy_expert(copy.as_string(cursor), buffer)
    finally:
        connection.close()
    rows = [decode_line(line) for line in buffer.getvalue().decode().splitlines()]
    return keyed(shape, [dict(zip(shape.column_names, row, strict=True)) for row in rows])


def current_rows(path: Path, shape: TableShape) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """The Parquet target's current rows, every value as PostgreSQL's text, by key."""
    rows = read_current_text(str(path), shape.schema, shape.name)
    return keyed(shape, [dict(zip(shape.column_names, row, strict=True)) for row in rows])


def change_log(path: Path, table: Table) -> pa.Table | None:
    files = change_files(str(path), table.schema, table.name)
    return pa.concat_tables([pq.read_table(file) for file in files]) if files else None


def visible(txid: int, snapshot: str) -> bool:
    """PostgreSQL's txid_visible_in_snapshot for committed transactions."""
    xmin, xmax, xip = snapshot.split(":")
    in_progress = {int(txid) for txid in xip.split(",") if txid}
    return txid < int(xmin) or (txid < int(xmax) and txid not in in_progress)


def test_parquet_current_state_and_change_log_under_concurrent_writes(
    sandbox: SandboxConnection,
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: Processes,
) -> None:
    source = make_database("source")
    output = tmp_path / "parquet"
    run = Scenario(sandbox, cluster_name, source, tmp_path, processes, kafka_config)
    # A Parquet target cannot hold timestamps past 294247 AD (Arrow's limit): none here.
    run.prepare(zookeeper, TABLES, rows=1000, bulk_rows=0, seed=2, arrow_safe=True)
    relay = run.start_relay()
    configuration = write_replication_yml(
        tmp_path / "replication.yml",
        kafka_config,
        run.topic,
        {
            "path": "pgshovel.replication.targets.parquet:ParquetTarget",
            "configuration": {"path": str(output)},
        },
    )

    def state() -> tuple[str, int | None]:
        return parquet_state(output) or ("", None)

    workload = Workload(source, threads=3, seed=2, arrow_safe=True)
    workload.start()
    try:
        workload.wait_committed(30)
        before_snapshot = workload.committed()
        worker = run.start_worker(configuration)
        wait_until(
            lambda: state()[0] == "streaming",
            "the snapshot to load",
            180,
            worker.alive,
            worker.output,
        )
        during_snapshot = workload.committed() - before_snapshot
        workload.wait_committed(150)
        workload.wait_count("truncates committed", 1)
    finally:
        counts = workload.stop()
    run.wait_caught_up(worker, lambda: state()[1])
    assert worker.stop() == 0, worker.output()[-3000:]
    assert relay.stop() == 0, relay.output()[-3000:]
    assert during_snapshot > 0, "the workload should have written while the snapshot loaded"

    stored = stored_state(output)
    assert stored is not None
    batches = validated(read_topic(kafka_config, run.topic))
    operations: Counter[str] = Counter()
    for table in TABLES:
        shape = shape_of(source, table)
        expected = source_rows(source, shape)
        actual = current_rows(output, shape)
        missing = sorted(set(expected) - set(actual), key=repr)[:5]
        extra = sorted(set(actual) - set(expected), key=repr)[:5]
        differ = [key for key in expected if key in actual and expected[key] != actual[key]]
        assert expected == actual, (
            f"{shape.qualified}: missing keys {missing!r}, extra keys {extra!r}, differing rows "
            f"{[(expected[key], actual[key]) for key in differ[:3]]!r}"
        )
        # Exactly the committed mutations the snapshot did not hold, each once.
        wanted = [
            (batch.node.hex(), batch.batch_id, mutation.id)
            for batch in batches
            for mutation in batch.mutations
            if (mutation.schema, mutation.table) == (table.schema, table.name)
            and not visible(mutation.transaction, stored.snapshot)
        ]
        log = change_log(output, table)
        assert log is not None, f"{shape.qualified}: no change log"
        logged = list(
            zip(
                log.column("node").to_pylist(),
                log.column("batch_id").to_pylist(),
                log.column("mutation_id").to_pylist(),
                strict=True,
            )
        )
        assert len(set(logged)) == len(logged), f"{shape.qualified}: duplicate change log rows"
        assert sorted(logged) == sorted(wanted)
        operations.update(log.column("operation").to_pylist())
    assert set(operations) == {"INSERT", "UPDATE", "DELETE", "TRUNCATE"}, operations
    assert counts["aborted"] > 0
