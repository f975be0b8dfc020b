"""A partitioned set topic (``partitions: 4``) end to end into PostgreSQL, through kill -9s.

The relay frames every batch in the four partitions; the worker reads them all
and joins each batch across the partitions before it applies it, under a
concurrent workload whose key changes move rows between partitions. The relay
and the worker are killed -9 once each and restarted; once caught up (every
partition's end in the stored position) the target equals the source row for
row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from pgshovel.sandbox import SandboxConnection

from ._partitioned import (
    applied_messages,
    create_partitioned_topic,
    replication_yml,
    start_partitioned_relay,
    wait_partitions_caught_up,
)
from ._scenario import Processes, Scenario
from ._schema import MATRIX, ODD, PAIRS, assert_same_rows, create_types
from ._stack import wait_until
from ._workload import Workload

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]

TABLES = (ODD, PAIRS, MATRIX)
PARTITIONS = 4


def test_a_partitioned_topic_is_joined_and_applied_through_kills(
    sandbox: SandboxConnection,
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: Processes,
) -> None:
    source, target = make_database("source"), make_database("target")
    run = Scenario(sandbox, cluster_name, source, tmp_path, processes, kafka_config)
    run.prepare(zookeeper, TABLES, rows=300, bulk_rows=0, seed=5)
    create_types(target)
    create_partitioned_topic(run, PARTITIONS)
    relay = start_partitioned_relay(run, PARTITIONS)
    configuration = replication_yml(tmp_path / "replication.yml", run, target)
    workload = Workload(source, threads=2, seed=5)
    workload.start()
    try:
        workload.wait_committed(20)
        worker = run.start_worker(configuration)
        wait_until(
            lambda: applied_messages(target, cluster_name) > 0,
            "the first applied batch",
            alive=worker.alive,
            log=worker.output,
        )
        relay.kill()
        workload.wait_committed(30)
        relay = start_partitioned_relay(run, PARTITIONS)
        applied = applied_messages(target, cluster_name)
        wait_until(
            lambda: applied_messages(target, cluster_name) > applied,
            "batches of the new relay",
            alive=worker.alive,
            log=worker.output,
        )
        worker.kill()
        workload.wait_committed(30)
        worker = run.start_worker(configuration)
        workload.wait_committed(30)
    finally:
        counts = workload.stop()
    wait_partitions_caught_up(run, worker, target, PARTITIONS)
    assert worker.stop() == 0, worker.output()[-3000:]
    assert relay.stop() == 0, relay.output()[-3000:]
    assert counts["key changes"] > 0 and counts["aborted"] > 0, dict(counts)
    for table in TABLES:
        assert_same_rows(source, target, table)
    assert "resuming the stream at position 0:" in worker.output()
