"""A partitioned set topic (``partitions: 4``) end to end into PostgreSQL, through kill -9s.

The relay frames every batch in the four partitions; the worker reads them all
and joins each batch across the partitions before it applies it, under a
concurrent workload whose key changes move rows between partitions. The relay
and the worker are killed -9 once each and restarted; once caught up (every
partition's end in the stored position) the target equals the source row for
row. Then the staged apply on a Spark standalone cluster: micro-batches staged
by executors and committed once, under bank transfers between accounts of
different partitions that an auditor checks in every snapshot of the copy it
reads, through kill -9 of the relay, a Spark worker and the worker's driver.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from kazoo.client import KazooClient

from pgshovel.replication.staging.postgres import leftover_stages, stage_prefix
from pgshovel.sandbox import SandboxConnection, SparkCluster, kill_spark_worker, start_spark
from pgshovel.source import connect
from tests.fix_sandbox import SPARK_WORKERS
from tests.integration.capture._capture import SET, install

from ._bank import ENTRIES, TOTAL, BalanceAuditor, Bank, create_bank, table_rows
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
#: Spark JVMs start slowly on a loaded machine; nothing here depends on speed.
PATIENCE = 300.0


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
        workload.wait_committed(15)
        relay = start_partitioned_relay(run, PARTITIONS)
        applied = applied_messages(target, cluster_name)
        wait_until(
            lambda: applied_messages(target, cluster_name) > applied,
            "batches of the new relay",
            alive=worker.alive,
            log=worker.output,
        )
        worker.kill()
        workload.wait_committed(15)
        worker = run.start_worker(configuration)
        workload.wait_committed(15)
    finally:
        counts = workload.stop()
    wait_partitions_caught_up(run, worker, target, PARTITIONS)
    assert worker.stop() == 0, worker.output()[-3000:]
    assert relay.stop() == 0, relay.output()[-3000:]
    assert counts["key changes"] > 0 and counts["aborted"] > 0, dict(counts)
    for table in TABLES:
        assert_same_rows(source, target, table)
    assert "resuming the stream at position 0:" in worker.output()


def _stages_left(dsn: str, prefix: str) -> list[str]:
    connection = connect(dsn, "pgshovel-tests")
    try:
        with connection.cursor() as cursor:
            return leftover_stages(cursor, prefix)
    finally:
        connection.close()


def _staged(worker_log: str) -> int:
    return worker_log.count("staged micro-batch")


def test_staged_micro_batches_commit_once_through_kills(
    sandbox: SandboxConnection,
    spark_cluster: SparkCluster,
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: Processes,
) -> None:
    state_dir = Path(sandbox.state_dir)
    source, target = make_database("source"), make_database("target")
    run = Scenario(sandbox, cluster_name, source, tmp_path, processes, kafka_config)
    create_bank(source)
    install(zookeeper, cluster_name, source, ENTRIES, allow_unkeyed=True)
    create_partitioned_topic(run, PARTITIONS)
    relay = start_partitioned_relay(run, PARTITIONS)
    configuration = replication_yml(tmp_path / "replication.yml", run, target)
    document = yaml.safe_load(configuration.read_text())
    document["spark"]["master"] = spark_cluster.master_url
    document["stage_min_mutations"] = 8
    configuration.write_text(yaml.safe_dump(document))
    bank = Bank(source, PARTITIONS)
    auditor = BalanceAuditor(target, cluster_name)
    bank.start()
    auditor.start()
    staged_before, lost_executor = 0, False
    try:
        bank.wait("committed", 20)
        worker = run.start_worker(configuration)

        def staged_more(than: int) -> None:
            wait_until(
                lambda: _staged(worker.output()) > than,
                "a staged micro-batch",
                PATIENCE,
                worker.alive,
                worker.output,
            )

        staged_more(0)
        relay.kill()
        bank.wait("committed", 15)
        relay = start_partitioned_relay(run, PARTITIONS)
        staged_more(_staged(worker.output()))
        kill_spark_worker(state_dir, "worker-1")
        bank.wait("committed", 15)
        staged_more(_staged(worker.output()))
        start_spark(state_dir, SPARK_WORKERS)
        lost_executor = "Lost executor" in worker.output()
        worker.kill()
        staged_before = _staged(worker.output())
        bank.wait("committed", 15)
        worker = run.start_worker(configuration)
        staged_more(staged_before)
        bank.wait("committed", 15)
    finally:
        counts = bank.stop()
        start_spark(state_dir, SPARK_WORKERS)  # the next test finds the cluster whole
    wait_partitions_caught_up(run, worker, target, PARTITIONS)
    auditor.stop()
    assert worker.stop() == 0, worker.output()[-3000:]
    assert relay.stop() == 0, relay.output()[-3000:]
    assert counts["rolled back"] > 0 and counts["key changes"] > 0, dict(counts)
    assert auditor.checks > 0 and auditor.violations == [], auditor.violations[:5]
    for query in (
        "SELECT id, balance FROM accounts ORDER BY id",
        "SELECT id, value, label FROM items ORDER BY id",
    ):
        assert table_rows(target, query) == table_rows(source, query), query
    journal = "SELECT account, amount, note FROM journal"
    assert Counter(table_rows(target, journal)) == Counter(table_rows(source, journal))
    assert (
        sum(balance for _, balance in table_rows(target, "SELECT id, balance FROM accounts"))
        == TOTAL
    )
    # The staged path ran before each kill and after the driver's restart (the log is
    # appended to by every worker process of the run).
    assert _staged(worker.output()) > staged_before >= 3
    assert lost_executor, worker.output()[-3000:]
    assert "resuming the stream at position 0:" in worker.output()
    # Every micro-batch's staging tables are gone: committed ones dropped with the commit,
    # those of the micro-batch the driver's kill interrupted when it started again.
    assert _stages_left(target, stage_prefix(cluster_name, SET)) == []
