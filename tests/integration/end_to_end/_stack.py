"""The real processes of an end-to-end run: ``pgshovel-replicate`` beside the relay helpers.

The worker runs as the installed console script in its own process group, so a
kill -9 takes its Spark JVM down with it, exactly as a crash would. "Caught up"
is judged as a user would: the relay drained the PgQ queue, and the position
the worker committed with its data is the last message of the topic.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Consumer, TopicPartition
from psycopg2 import sql

from pgshovel.sandbox import ChildProcess, SandboxConnection
from pgshovel.source import connect
from tests.integration.capture._capture import SET
from tests.integration.relay._relay import queue_drained
from tests.stored_state import parquet_state as stored_parquet_state
from tests.stored_state import phase_and_offset, postgres_state

from ._schema import Table

REPLICATE = Path(sys.executable).with_name("pgshovel-replicate")


def write_replication_yml(
    path: Path,
    kafka_config: Mapping[str, str],
    topic: str,
    target: Mapping[str, Any],
    ranges_per_table: int = 4,
    part_mutations: int = 20000,
    master: str = "local[2]",
    max_batch_messages: int = 2000,
) -> Path:
    properties = {key: value for key, value in kafka_config.items() if key != "bootstrap.servers"}
    document = {
        "spark": {
            "master": master,
            "conf": {
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "2",
                "spark.default.parallelism": "2",
            },
        },
        "loader": {
            "path": "pgshovel.replication.loaders:PostgresSnapshotLoader",
            "configuration": {"ranges_per_table": ranges_per_table, "progress_interval": 1.0},
        },
        "stream": {
            "path": "pgshovel.replication.streams:KafkaStream",
            "configuration": {
                "bootstrap_servers": kafka_config["bootstrap.servers"],
                "topic": topic,
                "properties": properties,
                "max_batch_messages": max_batch_messages,
                "part_mutations": part_mutations,
            },
        },
        "target": dict(target),
    }
    path.write_text(yaml.safe_dump(document, allow_unicode=True))
    return path


class WorkerProcess(ChildProcess):
    """``pgshovel-replicate replication.yml capture`` as a child process group."""

    def __init__(
        self, sandbox: SandboxConnection, cluster: str, configuration: Path, log: Path
    ) -> None:
        environment = dict(
            os.environ, PGSHOVEL_CLUSTER=cluster, PGSHOVEL_ZOOKEEPER_HOSTS=sandbox.zookeeper_hosts
        )
        super().__init__(
            "pgshovel-replicate", [str(REPLICATE), str(configuration), SET], log, env=environment
        )

    def alive(self) -> bool:
        return self.running()

    def stop(self, timeout: float = 120.0) -> int:
        """SIGTERM (stop after the current micro-batch); the exit code (-9: it had to be killed)."""
        return super().stop(timeout)


def wait_until(
    condition: Callable[[], bool],
    what: str,
    timeout: float = 120.0,
    alive: Callable[[], bool] | None = None,
    log: Callable[[], str] | None = None,
) -> None:
    """Poll ``condition``; fail if ``alive()`` turns false or the timeout passes."""
    deadline = time.monotonic() + timeout
    while not condition():
        detail = f"\n--- log (tail) ---\n{log()[-4000:]}" if log is not None else ""
        if alive is not None and not alive():
            raise AssertionError(f"the process exited while waiting for {what}{detail}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}{detail}")
        time.sleep(0.2)


def worker_state(target: str, cluster: str) -> tuple[str, int | None] | None:
    """(phase, stored offset) of the worker's state in a PostgreSQL target, None if none."""
    return phase_and_offset(postgres_state(target, cluster, SET))


def parquet_state(path: Path) -> tuple[str, int | None] | None:
    """(phase, stored offset) of the worker's state in a Parquet target, None if none."""
    return phase_and_offset(stored_parquet_state(path))


def count_rows(dsn: str, table: Table) -> int:
    """Rows of a table, 0 while it does not exist yet."""
    connection = connect(dsn, "pgshovel-tests")
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT to_regclass(%s) IS NOT NULL", (table.identifier.as_string(cursor),)
            )
            found = cursor.fetchone()
            if found is None or not found[0]:
                return 0
            cursor.execute(sql.SQL("SELECT count(*) FROM {}").format(table.identifier))
            counted = cursor.fetchone()
        connection.rollback()
    finally:
        connection.close()
    return 0 if counted is None else int(counted[0])


def topic_end(kafka_config: Mapping[str, str], topic: str) -> int:
    """The topic's end offset (the offset the next message will get)."""
    consumer = Consumer({**kafka_config, "group.id": "pgshovel-e2e", "enable.auto.commit": "false"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    return int(high)


def wait_caught_up(
    source: str,
    cluster: str,
    kafka_config: Mapping[str, str],
    topic: str,
    stored_offset: Callable[[], int | None],
    alive: Callable[[], bool],
    log: Callable[[], str],
    timeout: float = 180.0,
) -> int:
    """Wait for the relay to drain the queue, then for the worker to store the topic's end."""
    wait_until(lambda: queue_drained(source, cluster), "the relay to drain the queue", timeout)
    end = topic_end(kafka_config, topic)
    wait_until(
        lambda: (stored_offset() or -1) >= end - 1,
        f"the worker to apply the topic up to offset {end - 1}",
        timeout,
        alive,
        log,
    )
    return end


def log_rates(log: str) -> dict[str, list[float]]:
    """The snapshot rows/s and apply mutations/s the worker logged (for the report)."""
    return {
        "snapshot rows/s": [
            float(value) for value in re.findall(r"rows in [\d.]+s \((\d+) rows/s\)", log)
        ],
        "apply mutations/s": [float(value) for value in re.findall(r"\((\d+) mutations/s\)", log)],
    }
