"""End to end into PostgreSQL: triggers, relay, Kafka and worker under a concurrent workload.

The real processes run against the sandbox while threads write: the worker's
snapshot loads concurrently with the writes, the stream goes on after it, and
once the writes stop and everything is caught up every table of the target
equals the source row for row. The crash test kills -9 the worker during the
snapshot and during streaming, and the relay mid-run, and restarts each; its
worker holds at most a few hundred mutations of a batch, so the large
transactions in the workload are applied in parts, through those kills.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from pgshovel.sandbox import SandboxConnection

from ._scenario import Processes, Scenario
from ._schema import BULK, MATRIX, ODD, PAIRS, assert_same_rows, create_types
from ._stack import count_rows, log_rates, wait_until, worker_state, write_replication_yml
from ._workload import LargeTransactions, Workload

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]

TABLES = (ODD, PAIRS, MATRIX, BULK)


def scenario(
    sandbox: SandboxConnection,
    cluster_name: str,
    source: str,
    tmp_path: Path,
    processes: Processes,
    kafka_config: dict[str, str],
) -> Scenario:
    return Scenario(sandbox, cluster_name, source, tmp_path, processes, kafka_config)


def test_target_converges_while_the_source_keeps_changing(
    sandbox: SandboxConnection,
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: Processes,
) -> None:
    source, target = make_database("source"), make_database("target")
    run = scenario(sandbox, cluster_name, source, tmp_path, processes, kafka_config)
    run.prepare(zookeeper, TABLES, rows=1500, bulk_rows=20_000, seed=1)
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
    )
    workload = Workload(source, threads=3, seed=1)
    workload.start()
    try:
        workload.wait_committed(30)
        before_snapshot = workload.committed()
        worker = run.start_worker(configuration)
        wait_until(
            lambda: (worker_state(target, cluster_name) or ("", None))[0] == "streaming",
            "the snapshot to load",
            alive=worker.alive,
            log=worker.output,
        )
        during_snapshot = workload.committed() - before_snapshot
        # Streaming while the writes go on: some micro-batches applied, then more writes.
        wait_until(
            lambda: (worker_state(target, cluster_name) or ("", None))[1] is not None,
            "the first applied micro-batch",
            alive=worker.alive,
            log=worker.output,
        )
        workload.wait_committed(150)
        workload.wait_count("truncates committed", 1)
        time.sleep(2)
    finally:
        counts = workload.stop()
    run.wait_caught_up(worker, lambda: (worker_state(target, cluster_name) or ("", None))[1])
    assert worker.stop() == 0, worker.output()[-3000:]
    assert relay.stop() == 0, relay.output()[-3000:]

    assert during_snapshot > 0, "the workload should have written while the snapshot loaded"
    assert counts["aborted"] > 0 and counts["savepoint rollbacks"] > 0, dict(counts)
    assert counts["key changes"] > 0 and counts["deletes"] > 0, dict(counts)
    for table in TABLES:
        assert_same_rows(source, target, table)
    assert count_rows(target, MATRIX) > 1500
    log = worker.output()
    rates = log_rates(log)
    assert rates["snapshot rows/s"] and rates["apply mutations/s"], log[-3000:]


#: the relay's messages in this test hold a few dozen rows each: a large transaction's batch
#: then reaches the worker over many reads and is applied in parts (whole ROWS messages of
#: 512 KiB would bring each 4,000-row batch in one read)
SMALL_MESSAGES = 4096
#: ...and the worker reads at most this many messages at a time: a 4,000-row transaction
#: (~180 such messages) always ends after a read that holds part of it, so parts come with
#: the first large transactions instead of whenever a read happens to stop mid-batch (which
#: took a minute of the run to happen by chance)
READ_MESSAGES = 100
#: seconds between large transactions: one every second or so still runs through every kill,
#: and what a restarted worker finds behind it (read 100 messages at a time) stays small
LARGE_PAUSE = 1.0


def test_kill_9_worker_and_relay_then_restart_converges(
    sandbox: SandboxConnection,
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: Processes,
) -> None:
    bulk_rows = 150_000
    source, target = make_database("source"), make_database("target")
    run = scenario(sandbox, cluster_name, source, tmp_path, processes, kafka_config)
    run.prepare(zookeeper, TABLES, rows=1000, bulk_rows=bulk_rows, seed=3)
    create_types(target)
    relay = run.start_relay(max_message_bytes=SMALL_MESSAGES)
    configuration = write_replication_yml(
        tmp_path / "replication.yml",
        kafka_config,
        run.topic,
        {
            "path": "pgshovel.replication.targets.postgresql:PostgresTarget",
            "configuration": {"dsn": target},
        },
        ranges_per_table=8,
        part_mutations=300,
        max_batch_messages=READ_MESSAGES,
    )

    def phase() -> str:
        return (worker_state(target, cluster_name) or ("", None))[0]

    def offset() -> int | None:
        return (worker_state(target, cluster_name) or ("", None))[1]

    workload = Workload(source, threads=3, seed=3)
    workload.start()
    large: LargeTransactions | None = None
    try:
        workload.wait_committed(20)
        # 1. kill -9 the worker while snapshot ranges are being committed.
        worker = run.start_worker(configuration)
        wait_until(
            lambda: phase() == "snapshot" and count_rows(target, BULK) > 0,
            "the first snapshot ranges",
            alive=worker.alive,
            log=worker.output,
        )
        worker.kill()
        partial = count_rows(target, BULK)
        assert phase() == "snapshot"
        assert 0 < partial < bulk_rows, "the kill should have hit the middle of the load"

        # 2. A new worker loads again and streams; the relay is killed -9 and restarted
        # while large transactions (applied in parts) go through.
        worker = run.start_worker(configuration)
        wait_until(lambda: offset() is not None, "streaming", alive=worker.alive, log=worker.output)
        large = LargeTransactions(source, rows=bulk_rows, pause=LARGE_PAUSE)
        large.start()
        workload.wait_committed(40)
        wait_until(
            lambda: "applied part" in worker.output(),
            "a part",
            alive=worker.alive,
            log=worker.output,
        )
        relay.kill()
        workload.wait_committed(40)
        relay = run.start_relay(max_message_bytes=SMALL_MESSAGES)
        workload.wait_committed(40)
        applied = offset() or 0
        wait_until(
            lambda: (offset() or 0) > applied,
            "batches of the new relay to be applied",
            alive=worker.alive,
            log=worker.output,
        )
        # 3. kill -9 the worker while it streams; a new one resumes from its stored position.
        worker.kill()
        stopped_at = offset()
        workload.wait_committed(40)
        worker = run.start_worker(configuration)
        wait_until(
            lambda: (offset() or 0) > (stopped_at or 0),
            "the restarted worker to apply",
            alive=worker.alive,
            log=worker.output,
        )
        workload.wait_committed(40)
    finally:
        counts = workload.stop()
        large_transactions = large.stop() if large is not None else 0
    run.wait_caught_up(worker, offset)
    assert worker.stop() == 0, worker.output()[-3000:]
    assert relay.stop() == 0, relay.output()[-3000:]

    assert counts["committed"] >= 200 and counts["aborted"] > 0, dict(counts)
    assert large_transactions >= 2, large_transactions
    for table in TABLES:
        assert_same_rows(source, target, table)
    assert count_rows(target, BULK) == bulk_rows
    log = worker.output()
    assert "previous snapshot load did not finish" in log
    assert "resuming the stream at position" in log
