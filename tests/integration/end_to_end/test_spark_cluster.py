"""End to end on a real Spark standalone cluster: the worker unchanged, one Spark worker killed.

``pgshovel-replicate`` runs with ``spark.master`` set to the sandbox's
standalone master (two one-core workers): its snapshot ranges are copied by
executors in other JVMs and Python processes than the driver's. During the
load, one Spark worker is killed -9 with its executor, as a machine's crash
would; Spark runs the lost ranges again on the other worker, and the load ends
exact without the worker restarting it (a range is recorded with its rows, so
an attempt that committed before it was lost is not copied twice). Then the
stream applies a concurrent workload, and every table of the target equals the
source row for row. A replacement worker joins the cluster afterwards.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from pgshovel.sandbox import SandboxConnection, SparkCluster, kill_spark_worker, start_spark
from tests.fix_sandbox import SPARK_WORKERS

from ._scenario import Processes, Scenario
from ._schema import BULK, MATRIX, ODD, PAIRS, assert_same_rows, create_types
from ._stack import count_rows, wait_until, worker_state, write_replication_yml
from ._workload import Workload

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]

TABLES = (ODD, PAIRS, MATRIX, BULK)
#: Spark JVMs start slowly on a loaded machine; nothing here depends on speed.
PATIENCE = 300.0


def test_standalone_cluster_loads_through_a_killed_worker_then_streams_row_for_row(
    sandbox: SandboxConnection,
    spark_cluster: SparkCluster,
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: Processes,
) -> None:
    bulk_rows = 150_000
    state_dir = Path(sandbox.state_dir)
    source, target = make_database("source"), make_database("target")
    run = Scenario(sandbox, cluster_name, source, tmp_path, processes, kafka_config)
    run.prepare(zookeeper, TABLES, rows=500, bulk_rows=bulk_rows, seed=11)
    create_types(target)
    relay = run.start_relay()
    configuration = write_replication_yml(
        tmp_path / "replication.yml",
        kafka_config,
        run.topic,
        {
            "path": "pgshovel.replication.targets.postgresql:PostgresTarget",
            "configuration": {"dsn": target},
        },
        ranges_per_table=8,
        master=spark_cluster.master_url,
    )

    def phase() -> str:
        return (worker_state(target, cluster_name) or ("", None))[0]

    def offset() -> int | None:
        return (worker_state(target, cluster_name) or ("", None))[1]

    workload = Workload(source, threads=2, seed=11)
    workload.start()
    try:
        workload.wait_committed(20)
        worker = run.start_worker(configuration)
        # The bulk table's ranges come last: its first committed range means the
        # load is under way on both executors, with most of it still to come.
        wait_until(
            lambda: phase() == "snapshot" and count_rows(target, BULK) > 0,
            "the first ranges of the bulk table",
            PATIENCE,
            worker.alive,
            worker.output,
        )
        killed = kill_spark_worker(state_dir, "worker-1")
        assert phase() == "snapshot"
        assert count_rows(target, BULK) < bulk_rows, "the kill should hit the middle of the load"
        wait_until(
            lambda: phase() == "streaming",
            "the load to end on the surviving worker",
            PATIENCE,
            worker.alive,
            worker.output,
        )
        # Exact as loaded: the workload never writes the bulk table.
        assert assert_same_rows(source, target, BULK) == bulk_rows
        wait_until(lambda: offset() is not None, "streaming", PATIENCE, worker.alive, worker.output)
        # A replacement worker joins while the stream goes on.
        replaced = start_spark(state_dir, SPARK_WORKERS)
        assert replaced.workers["worker-1"].pid != killed.pid
        workload.wait_committed(60)
    finally:
        counts = workload.stop()
        start_spark(state_dir, SPARK_WORKERS)  # the next test finds the cluster whole
    run.wait_caught_up(worker, offset)
    assert worker.stop() == 0, worker.output()[-3000:]
    assert relay.stop() == 0, relay.output()[-3000:]

    assert counts["aborted"] > 0 and counts["key changes"] > 0, dict(counts)
    for table in TABLES:
        assert_same_rows(source, target, table)
    log = worker.output()
    assert "Lost executor" in log, log[-3000:]  # the driver saw the killed worker go
    assert "previous snapshot load did not finish" not in log  # Spark retried; no reload
