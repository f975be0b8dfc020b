"""Read-your-writes: a writer commits, then waits on the copy until its transaction is there.

The real relay and worker run while a paced background writer keeps the source
busy. Each probe commits a row, takes its ``txid_current()``, calls
``pgshovel_replication.wait_applied`` on the target and must then see the row in
the same target session; ``pgshovel-admin set wait`` answers the same from the
workers' status. The worker is killed -9 half-way and restarted (the horizon is
stored with the data, so the answers stay exact). A transaction that rolled back
is reported at once by ``set wait`` (exit 2); one still in progress makes it
time out (exit 1); one that touched no captured table counts as applied once a
later tick covers it. The wait latency (p50/p99) is logged for the notes
(``PGSHOVEL_RYW_RATE`` sets the background rate, default 300 tx/s).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from kazoo.client import KazooClient

from pgshovel.sandbox import SandboxConnection
from tests.integration.capture._capture import SET, install
from tests.integration.relay._relay import RelayProcess, topic_of, write_relay_yml
from tests.stored_state import postgres_state

from ._scenario import Processes
from ._stack import WorkerProcess, wait_until, worker_state, write_replication_yml

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]

logger = logging.getLogger(__name__)

ADMIN = Path(sys.executable).with_name("pgshovel-admin")
SCHEMA = "CREATE TABLE items (id bigint PRIMARY KEY, note text); CREATE TABLE other (n int)"


def connect(dsn: str, autocommit: bool = False) -> Any:
    connection = psycopg2.connect(dsn)
    connection.autocommit = autocommit
    return connection


class Background(threading.Thread):
    """Commits single-row transactions at ``rate`` per second until stopped."""

    def __init__(self, dsn: str, rate: int) -> None:
        super().__init__(daemon=True)
        self.dsn, self.rate = dsn, rate
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            connection = connect(self.dsn, autocommit=True)
            started, n = time.monotonic(), 0
            with connection.cursor() as cursor:
                while not self.stop.is_set():
                    n += 1
                    cursor.execute("INSERT INTO items VALUES (%s, 'background')", (-n,))
                    pause = started + n / self.rate - time.monotonic()
                    if pause > 0:
                        time.sleep(pause)
            connection.close()
        except BaseException as error:  # reported by the test
            self.error = error


def commit_probe(source: Any, key: int) -> int:
    with source.cursor() as cursor:
        cursor.execute("INSERT INTO items VALUES (%s, 'probe') RETURNING txid_current()", (key,))
        row = cursor.fetchone()
    source.commit()
    return int(row[0])


def set_wait(
    sandbox: SandboxConnection, cluster: str, txid: int, timeout: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ADMIN), "set", "wait", SET, str(txid), "--timeout", str(timeout)],
        env={
            **os.environ,
            "PGSHOVEL_CLUSTER": cluster,
            "PGSHOVEL_ZOOKEEPER_HOSTS": sandbox.zookeeper_hosts,
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def test_wait_applied_returns_when_the_row_is_visible_through_a_kill_9(
    sandbox: SandboxConnection,
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: Processes,
) -> None:
    source, target = make_database("source"), make_database("target")
    setup = connect(source, autocommit=True)
    with setup.cursor() as cursor:
        cursor.execute(SCHEMA)
    setup.close()
    install(zookeeper, cluster_name, source, [{"schema": "public", "name": "items"}])
    relay = RelayProcess(sandbox, cluster_name, write_relay_yml(tmp_path, sandbox), tmp_path / "r")
    processes.append(relay)
    configuration = write_replication_yml(
        tmp_path / "replication.yml",
        kafka_config,
        topic_of(cluster_name),
        {
            "path": "pgshovel.replication.targets.postgresql:PostgresTarget",
            "configuration": {"dsn": target},
        },
    )

    def start_worker() -> WorkerProcess:
        worker = WorkerProcess(sandbox, cluster_name, configuration, tmp_path / "worker.log")
        processes.append(worker)
        wait_until(
            lambda: (worker_state(target, cluster_name) or ("", None))[0] == "streaming",
            "the worker to stream",
            alive=worker.alive,
            log=worker.output,
        )
        return worker

    worker = start_worker()
    background = Background(source, int(os.environ.get("PGSHOVEL_RYW_RATE", "300")))
    background.start()
    writer, reader = connect(source), connect(target, autocommit=True)
    latencies: list[float] = []
    try:
        for key in range(1, 121):
            if key == 60:
                worker.kill()  # kill -9; a new worker resumes from the stored horizon
                worker = start_worker()
            txid = commit_probe(writer, key)
            started = time.monotonic()
            with reader.cursor() as cursor:
                cursor.execute("SELECT pgshovel_replication.wait_applied(%s, '60 s')", (txid,))
                waited = cursor.fetchone()
                stored = postgres_state(target, cluster_name, SET)
                assert waited == (True,), f"txid {txid}, state {stored}"
                latencies.append((time.monotonic() - started) * 1000)
                cursor.execute("SELECT note FROM items WHERE id = %s", (key,))
                assert cursor.fetchone() == ("probe",), f"probe {key} (txid {txid}) not visible"
        # set wait agrees for a committed transaction.
        txid = commit_probe(writer, 1000)
        done = set_wait(sandbox, cluster_name, txid, 60)
        assert done.returncode == 0, done.stdout + done.stderr
        # A transaction that rolled back: answered at once, never applied.
        with writer.cursor() as cursor:
            cursor.execute("INSERT INTO items VALUES (1001, 'aborted') RETURNING txid_current()")
            aborted = int(cursor.fetchone()[0])
        writer.rollback()
        started = time.monotonic()
        rolled = set_wait(sandbox, cluster_name, aborted, 60)
        assert rolled.returncode == 2 and "rolled back" in rolled.stdout, rolled.stdout
        assert time.monotonic() - started < 30
        # A transaction touching no captured table is applied once a later tick covers it.
        with writer.cursor() as cursor:
            cursor.execute("INSERT INTO other VALUES (1) RETURNING txid_current()")
            untouched = int(cursor.fetchone()[0])
        writer.commit()
        with reader.cursor() as cursor:
            cursor.execute("SELECT pgshovel_replication.wait_applied(%s, '60 s')", (untouched,))
            assert cursor.fetchone() == (True,)
        # One still in progress: set wait times out, applied() says no.
        pending = connect(source)
        with pending.cursor() as cursor:
            cursor.execute("SELECT txid_current()")
            open_txid = int(cursor.fetchone()[0])
        late = set_wait(sandbox, cluster_name, open_txid, 2)
        assert late.returncode == 1, late.stdout + late.stderr
        with reader.cursor() as cursor:
            cursor.execute("SELECT pgshovel_replication.applied(%s)", (open_txid,))
            assert cursor.fetchone() == (False,)
        pending.rollback()
        pending.close()
    finally:
        background.stop.set()
        background.join(30)
        writer.close()
        reader.close()
    assert background.error is None, background.error
    logger.warning(
        "read-your-writes wait at %s tx/s: p50 %.1f ms, p99 %.1f ms over %d probes",
        background.rate,
        percentile(latencies, 0.5),
        percentile(latencies, 0.99),
        len(latencies),
    )
    assert worker.stop() == 0 and relay.stop() == 0
