"""A partitioned stream (``partitions: 2``) staged by Spark tasks into Delta, through kill -9.

The relay writes two partitions; the worker (local Spark, ``stage_min_mutations``
set low) stages the micro-batches of a workload of bulk updates, inserts, key
changes, deletes and TRUNCATE on executors as Parquet files and commits each
once through the Delta target's commit. The worker's driver is killed -9 once
and restarted; once caught up (every partition's end in the position stored
with the Delta tables) every table read with ``deltalake`` equals the source
row for row, the worker logged staged micro-batches before and after the kill,
and no micro-batch staging directory is left.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from kazoo.client import KazooClient

from pgshovel.replication.staging.tablefmt import leftover_directories
from pgshovel.sandbox import SandboxConnection
from tests.integration.relay._relay import queue_drained

from ._partitioned import create_partitioned_topic, partition_ends, start_partitioned_relay
from ._scenario import Processes, Scenario, captured_source
from ._stack import wait_until
from ._targets import make_target, source_rows
from ._threads import WriterThreads

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]

PARTITIONS = 2
SCHEMA = """
CREATE TABLE items (id bigint PRIMARY KEY, v text, n integer);
CREATE TABLE pairs (region text, n bigint, payload text, PRIMARY KEY (region, n));
INSERT INTO items SELECT g, 'v' || g, g FROM generate_series(1, 300) g;
INSERT INTO pairs SELECT r, g, 'p' || g FROM generate_series(1, 40) g, unnest(ARRAY['n', 's']) r;
"""


class BulkWriter(WriterThreads):
    """Transactions of bulk updates (tens of rows), inserts, key changes, deletes, TRUNCATE."""

    #: a few transactions a second: micro-batches of hundreds of row changes, quickly caught up
    pause = 0.2

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn, threads=2)
        self.keys = iter(range(100_000, 10**9))

    def write(self, cursor: Any, rng: random.Random) -> None:
        choice = rng.random()
        if choice < 0.4:
            cursor.execute("UPDATE items SET n = n + 1 WHERE id %% 40 = %s", (rng.randrange(40),))
        elif choice < 0.6:
            key = next(self.keys)
            cursor.execute(
                "INSERT INTO items SELECT %s + g, 'new', g FROM generate_series(0, 9) g",
                (key * 100,),
            )
        elif choice < 0.75:
            cursor.execute(
                "UPDATE items SET id = id + 1000000 WHERE id IN "
                "(SELECT id FROM items WHERE id < 1000000 ORDER BY random() LIMIT 10)"
            )
        elif choice < 0.85:
            cursor.execute("DELETE FROM items WHERE id IN (SELECT id FROM items LIMIT 5)")
        elif choice < 0.9:
            cursor.execute("TRUNCATE pairs")
            cursor.execute(
                "INSERT INTO pairs SELECT r, g, 'refill' FROM generate_series(1, 15) g, "
                "unnest(ARRAY['n', 's']) r"
            )
        else:
            cursor.execute(
                "UPDATE pairs SET payload = payload || '+', n = n + 100 WHERE region = %s",
                (rng.choice(["n", "s"]),),
            )


def _staged(log: str) -> int:
    return log.count("staged micro-batch")


def test_delta_staged_micro_batches_equal_the_source_through_a_kill(
    sandbox: SandboxConnection,
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: Processes,
) -> None:
    source = captured_source(make_database, zookeeper, cluster_name, SCHEMA, ["items", "pairs"])
    run = Scenario(sandbox, cluster_name, source, tmp_path, processes, kafka_config)
    create_partitioned_topic(run, PARTITIONS)
    relay = start_partitioned_relay(run, PARTITIONS)
    copy = make_target("delta", make_database, tmp_path, cluster_name)
    configuration = run.replication_yml(copy.spec)
    document = yaml.safe_load(configuration.read_text())
    document["stage_min_mutations"] = 20
    configuration.write_text(yaml.safe_dump(document))
    writer = BulkWriter(source)
    writer.start()
    try:
        worker = run.start_worker(configuration)
        wait_until(
            lambda: _staged(worker.output()) > 0,
            "a staged micro-batch",
            300,
            worker.alive,
            worker.output,
        )
        worker.kill()
        before = _staged(worker.output())
        worker = run.start_worker(configuration)
        wait_until(
            lambda: _staged(worker.output()) > before,
            "a staged micro-batch after the restart",
            300,
            worker.alive,
            worker.output,
        )
    finally:
        writer.stop()
    ends = partition_ends(kafka_config, run.topic, PARTITIONS)

    def caught_up() -> bool:
        state = copy.state()
        if state is None or not state.position.consumed:
            return False
        offsets = [cursor.next_offset for cursor in state.position.partitions]
        return all(stored >= end for stored, end in zip(offsets, ends, strict=True))

    wait_until(lambda: queue_drained(source, cluster_name), "the relay to drain", 240)
    ends = partition_ends(kafka_config, run.topic, PARTITIONS)
    wait_until(caught_up, f"the worker to apply up to {ends}", 240, worker.alive, worker.output)
    assert worker.stop() == 0, worker.output()[-3000:]
    assert relay.stop() == 0, relay.output()[-3000:]
    for table in ("items", "pairs"):
        expected, actual = source_rows(source, table), copy.rows(table)
        missing = sorted(set(expected) - set(actual), key=repr)[:3]
        extra = sorted(set(actual) - set(expected), key=repr)[:3]
        assert actual == expected, f"{table}: missing {missing!r}, extra {extra!r}"
    assert _staged(worker.output()) > before >= 1
    assert "resuming the stream at position 0:" in worker.output()
    assert copy.root is not None
    staging = next((copy.root / "_pgshovel").iterdir()) / "_staging"
    assert leftover_directories(staging) == []
