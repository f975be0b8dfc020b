"""A TRUNCATE of a set table while the worker loads its snapshot: the load goes on, no hang.

The snapshot's readers must not hold a table lock for the whole load: a
TRUNCATE queued behind such a lock makes every later reader of that table wait
behind it, while the TRUNCATE waits for the load to end. The TRUNCATE reaches
the target through the stream (its transaction is not in the snapshot).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from psycopg2 import sql

from pgshovel.sandbox import SandboxConnection
from pgshovel.source import connect

from ._scenario import Processes, Scenario
from ._schema import BULK, PAIRS, REGIONS, assert_same_rows, pairs_row
from ._stack import count_rows, wait_until, worker_state, write_replication_yml

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]


def test_truncate_during_the_snapshot_load_does_not_block_it(
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
    run = Scenario(sandbox, cluster_name, source, tmp_path, processes, kafka_config)
    # The bulk table's ranges load first; the small table's ranges come after the TRUNCATE.
    run.prepare(zookeeper, (BULK, PAIRS), rows=500, bulk_rows=bulk_rows, seed=5)
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
    )
    worker = run.start_worker(configuration)

    def state() -> tuple[str, int | None]:
        return worker_state(target, cluster_name) or ("", None)

    wait_until(
        lambda: state()[0] == "snapshot" and count_rows(target, BULK) > 0,
        "the bulk table's first ranges",
        alive=worker.alive,
        log=worker.output,
    )
    assert count_rows(target, BULK) < bulk_rows, "the TRUNCATE should come during the load"
    connection = connect(source, "pgshovel-tests")
    with connection, connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '60s'")
        cursor.execute(sql.SQL("TRUNCATE {}").format(PAIRS.identifier))
        cursor.execute(
            sql.SQL("INSERT INTO {} VALUES (%s, %s, %s, %s, %s)").format(PAIRS.identifier),
            pairs_row(random.Random(1), REGIONS[0], 7),
        )
    connection.close()
    wait_until(
        lambda: state()[0] == "streaming", "the snapshot to load", 90, worker.alive, worker.output
    )
    run.wait_caught_up(worker, lambda: state()[1])
    assert worker.stop() == 0, worker.output()[-3000:]
    assert relay.stop() == 0, relay.output()[-3000:]
    assert assert_same_rows(source, target, PAIRS) == 1
    assert assert_same_rows(source, target, BULK) == bulk_rows
