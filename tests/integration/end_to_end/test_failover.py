"""Source failover: a set moved to a promoted physical standby, planned and unplanned.

Each test runs its own primary and a streaming standby of it (``start_server``),
a set on the primary with a keyed table and an unkeyed journal (a batch applied
twice would show there as duplicate rows), the real relay and worker, and
writer threads. Planned: writes go on throughout, as an application's would
(a writer refused by a read-only server retries on the other one);
``set failover --promote`` moves the relay off the primary, fences it,
promotes the standby and re-points the set — a first attempt blocked by a
transaction left open on the primary, with relay and worker killed -9 and
restarted while the set points at the standby, times out and undoes itself;
the second succeeds with no restart; no committed transaction is lost. Unplanned: the standby stops
receiving WAL while the primary keeps committing, then the primary is killed
-9 and the standby promoted: with failover-safe publishing (``standbys:``) the
relay never published what the standby lacks and the copy equals the promoted
primary; without it the relay stops with an error naming the remedy.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.errors
import pytest
from kazoo.client import KazooClient

from pgshovel.cluster import names
from pgshovel.cluster.sets import read_set
from pgshovel.protocol import configuration_pb2
from pgshovel.sandbox import SandboxConnection, Server, start_server, stop_server
from tests.integration.capture._capture import SET, install
from tests.integration.relay._relay import RelayProcess, topic_of, write_relay_yml

from ._scenario import Processes
from ._stack import WorkerProcess, wait_caught_up, wait_until, worker_state, write_replication_yml

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]

ADMIN = Path(sys.executable).with_name("pgshovel-admin")
SCHEMA = """
CREATE TABLE accounts (id integer PRIMARY KEY, balance bigint NOT NULL, note text);
INSERT INTO accounts SELECT i, 0, 'start' FROM generate_series(1, 200) AS i;
CREATE TABLE journal (writer text NOT NULL, n bigint NOT NULL, note text);
"""
ACCOUNTS = "SELECT id, balance, note FROM accounts ORDER BY id"
JOURNAL = "SELECT writer, n, note FROM journal ORDER BY writer, n, note"


@pytest.fixture
def servers(sandbox: SandboxConnection) -> Iterator[tuple[Server, Server]]:
    """A primary and its streaming standby, stopped after the test."""
    tag = uuid.uuid4().hex[:6]
    state_dir = Path(sandbox.state_dir)
    primary = start_server(state_dir, f"primary-{tag}")
    try:
        execute(primary.dsn(), SCHEMA)
        standby = start_server(state_dir, f"standby-{tag}", primary_port=primary.port)
        try:
            yield primary, standby
        finally:
            stop_server(state_dir, standby.name)
    finally:
        stop_server(state_dir, primary.name)


def _connect(dsn: str) -> Any:
    connection = psycopg2.connect(dsn, connect_timeout=5)
    connection.autocommit = True
    return connection


def execute(dsn: str, *statements: str) -> None:
    """Each statement on its own, outside any transaction block."""
    connection = _connect(dsn)
    try:
        with connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
    finally:
        connection.close()


def rows(dsn: str, query: str) -> list[tuple[Any, ...]]:
    connection = _connect(dsn)
    try:
        with connection.cursor() as cursor:
            cursor.execute(query)
            return list(cursor.fetchall())
    finally:
        connection.close()


class Writers:
    """Threads committing small transactions on one server until stopped (or it dies).

    With ``follow``, a thread refused by a read-only server (fenced, or a standby) rolls back
    and tries the next server of ``[dsn, *follow]``, round robin, as an application would.
    """

    def __init__(self, dsn: str, name: str, threads: int = 2, follow: tuple[str, ...] = ()) -> None:
        self.dsn, self.name = dsn, name
        self.servers = (dsn, *follow)
        self.committed = 0
        self.journal: set[tuple[str, int]] = set()  # committed journal rows (writer, n)
        self.refused = 0
        self.failures: list[BaseException] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._run, args=(index,)) for index in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    def _run(self, index: int) -> None:
        rng = random.Random(index)
        server = 0
        try:
            connection = psycopg2.connect(self.dsn, connect_timeout=5)
        except psycopg2.Error as error:
            self.failures.append(error)
            return
        n = 0
        try:
            while not self._stop.is_set():
                n += 1
                try:
                    with connection.cursor() as cursor:
                        cursor.execute(
                            "UPDATE accounts SET balance = balance + 1, note = %s WHERE id = %s",
                            (f"{self.name}-{index}-{n}", rng.randint(1, 200)),
                        )
                        cursor.execute(
                            "INSERT INTO journal VALUES (%s, %s, %s)",
                            (f"{self.name}-{index}", n, "x" * rng.randint(0, 40)),
                        )
                except psycopg2.errors.ReadOnlySqlTransaction:
                    if len(self.servers) == 1:
                        raise
                    connection.rollback()
                    connection.close()
                    with self._lock:
                        self.refused += 1
                    server = (server + 1) % len(self.servers)
                    self._stop.wait(0.05)
                    connection = psycopg2.connect(self.servers[server], connect_timeout=5)
                    continue
                if n % 9 == 0:
                    connection.rollback()  # aborted transactions leave nothing
                else:
                    connection.commit()
                    with self._lock:
                        self.committed += 1
                        self.journal.add((f"{self.name}-{index}", n))
        except psycopg2.Error as error:
            self.failures.append(error)  # the server went away (the unplanned case)
        finally:
            connection.close()

    def wait_committed(self, more: int) -> None:
        goal = self.committed + more
        wait_until(lambda: self.committed >= goal or bool(self.failures), f"{more} commits")
        assert not self.failures, self.failures

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)


class Run:
    """The set on the primary, a relay and a worker into a target on the sandbox."""

    def __init__(
        self,
        sandbox: SandboxConnection,
        zookeeper: KazooClient,
        cluster: str,
        primary: Server,
        target: str,
        directory: Path,
        processes: Processes,
        kafka_config: dict[str, str],
        standbys: list[str],
    ) -> None:
        self.sandbox, self.cluster, self.target = sandbox, cluster, target
        self.directory, self.kafka_config = directory, kafka_config
        install(
            zookeeper,
            cluster,
            primary.dsn(),
            [{"schema": "public", "name": "accounts"}, {"schema": "public", "name": "journal"}],
            allow_unkeyed=True,
        )
        config = write_relay_yml(directory, sandbox, standbys=standbys)
        self.relay_config, self.processes = config, processes
        self.relay = RelayProcess(sandbox, cluster, config, directory / "relay.log")
        processes.append(self.relay)
        replication = write_replication_yml(
            directory / "replication.yml",
            kafka_config,
            topic_of(cluster),
            {
                "path": "pgshovel.replication.targets.postgresql:PostgresTarget",
                "configuration": {"dsn": target},
            },
        )
        self.replication = replication
        self.worker = WorkerProcess(sandbox, cluster, replication, directory / "worker.log")
        processes.append(self.worker)

    def kill_9_and_restart(self, generation: int) -> None:
        """kill -9 of relay and worker, then new ones (logs ``*-<generation>.log``)."""
        self.relay.kill()
        self.worker.kill()
        self.relay = RelayProcess(
            self.sandbox,
            self.cluster,
            self.relay_config,
            self.directory / f"relay-{generation}.log",
        )
        self.processes.append(self.relay)
        self.worker = WorkerProcess(
            self.sandbox,
            self.cluster,
            self.replication,
            self.directory / f"worker-{generation}.log",
        )
        self.processes.append(self.worker)

    def offset(self) -> int | None:
        return (worker_state(self.target, self.cluster) or ("", None))[1]

    def wait_streaming(self) -> None:
        wait_until(
            lambda: self.offset() is not None,
            "the worker to stream",
            alive=self.worker.alive,
            log=self.worker.output,
        )

    def caught_up(self, source: str) -> None:
        try:
            wait_caught_up(
                source,
                self.cluster,
                self.kafka_config,
                topic_of(self.cluster),
                self.offset,
                self.worker.alive,
                self.worker.output,
            )
        except AssertionError as error:
            raise AssertionError(
                f"{error}\n--- relay log ---\n{self.relay.output()[-5000:]}"
            ) from error

    def failover(self, standby: Server, *options: str, succeeds: bool = True) -> str:
        result = subprocess.run(
            [str(ADMIN), "set", "failover", SET, "--to", standby.dsn(), *options],
            env={
                **os.environ,
                "PGSHOVEL_CLUSTER": self.cluster,
                "PGSHOVEL_ZOOKEEPER_HOSTS": self.sandbox.zookeeper_hosts,
            },
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert (result.returncode == 0) == succeeds, result.stdout + result.stderr
        return result.stdout + result.stderr

    def dsn(self, zookeeper: KazooClient) -> str:
        """The set's DSN as ZooKeeper holds it."""
        return read_set(zookeeper, self.cluster, SET).database.dsn


def assert_same(source: str, target: str) -> None:
    assert rows(target, ACCOUNTS) == rows(source, ACCOUNTS)
    assert rows(target, JOURNAL) == rows(source, JOURNAL)  # no batch applied twice


def point_at_standby(zookeeper: KazooClient, cluster: str, standby: Server) -> None:
    path = names.set_path(cluster, SET)
    data, stat = zookeeper.get(path)
    configuration = configuration_pb2.ReplicationSetConfiguration.FromString(data)
    configuration.database.dsn = standby.dsn()
    zookeeper.set(path, configuration.SerializeToString(), version=stat.version)


def disconnect(standby: Server) -> None:
    """The standby stops receiving WAL (a network partition, as far as it is concerned)."""
    execute(
        standby.dsn("postgres"),
        "ALTER SYSTEM SET primary_conninfo = 'host=127.0.0.1 port=1'",
        "SELECT pg_reload_conf()",
    )
    wait_until(
        lambda: not rows(standby.dsn("postgres"), "SELECT 1 FROM pg_stat_wal_receiver"),
        "the standby's WAL receiver to stop",
    )


@pytest.fixture
def start_run(
    sandbox: SandboxConnection,
    servers: tuple[Server, Server],
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: Processes,
) -> Callable[[list[str]], tuple[Run, str]]:
    """Start the set, relay (with ``standbys``) and worker on the primary; (run, target)."""

    def start(standbys: list[str]) -> tuple[Run, str]:
        target = make_database("target")
        run = Run(
            sandbox,
            zookeeper,
            cluster_name,
            servers[0],
            target,
            tmp_path,
            processes,
            kafka_config,
            standbys,
        )
        return run, target

    return start


def read_only(server: Server) -> str:
    return str(rows(server.dsn(), "SHOW default_transaction_read_only")[0][0])


def test_planned_switchover_under_writes_moves_relay_and_worker_without_a_restart(
    servers: tuple[Server, Server],
    start_run: Callable[[list[str]], tuple[Run, str]],
    zookeeper: KazooClient,
) -> None:
    primary, standby = servers
    run, target = start_run([])
    writers = Writers(primary.dsn(), "app", threads=3, follow=(standby.dsn(),))
    try:
        run.wait_streaming()
        writers.wait_committed(150)
        # A transaction left open on the primary: the fence waits for it, times out, undoes.
        blocker = psycopg2.connect(primary.dsn(), connect_timeout=5)
        try:
            with blocker.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM accounts")
            # kill -9 of relay and worker once the set points at the standby, mid-attempt.
            attempt: list[str] = []
            command = threading.Thread(
                target=lambda: attempt.append(
                    run.failover(standby, "--promote", "--timeout", "8", succeeds=False)
                )
            )
            command.start()
            try:
                wait_until(lambda: "moved to database" in run.relay.output(), "the relay to move")
                run.kill_9_and_restart(2)
            finally:
                command.join(300)
            assert attempt, "the failing attempt raised (see above)"
            output = attempt[0]
            assert "begun before the fence" in output and str(blocker.info.backend_pid) in output
            assert read_only(primary) == "off" and standby.in_recovery()
            assert run.dsn(zookeeper) == primary.dsn(), "the set points at the old primary again"
            writers.wait_committed(100)  # on the primary again
        finally:
            blocker.close()
        output = run.failover(standby, "--promote")  # writes go on during the switchover
        assert "fail set" in output and not standby.in_recovery()
        assert read_only(primary) == "on"
        writers.wait_committed(150)  # on the new primary
    finally:
        writers.stop()
    assert writers.refused > 0, "the writers were moved by the fence"
    assert "is a standby in recovery" in run.relay.output(), "restarted while pointing there"
    old_journal = {(w, n) for w, n, _ in rows(primary.dsn(), JOURNAL)}
    new_journal = {(w, n) for w, n, _ in rows(standby.dsn(), JOURNAL)}
    assert writers.journal <= new_journal, "a committed transaction was lost"
    assert old_journal <= new_journal, "the old primary committed after the fence"
    run.caught_up(standby.dsn())
    assert run.relay.alive() and run.worker.alive(), "neither was restarted"
    assert_same(standby.dsn(), target)
    assert "moved to database" in run.relay.output()
    # Not asserted of the worker: the restarted one may take the move back and the move
    # forward in one restart that finds the DSN it started with (nothing to log); it streams
    # from Kafka either way, and the copy above equals the new primary.
    assert run.worker.stop() == 0 and run.relay.stop() == 0


@pytest.mark.parametrize("safe", [True, False], ids=["failover-safe", "asynchronous"])
def test_unplanned_failover_is_exact_with_safe_publishing_and_detected_without(
    safe: bool,
    servers: tuple[Server, Server],
    start_run: Callable[[list[str]], tuple[Run, str]],
    zookeeper: KazooClient,
) -> None:
    primary, standby = servers
    run, target = start_run([standby.name] if safe else [])
    writers = Writers(primary.dsn(), "before")
    try:
        run.wait_streaming()
        writers.wait_committed(100)
        disconnect(standby)
        writers.wait_committed(100)  # committed on the primary only
        published = run.offset() or 0
        if not safe:
            wait_until(lambda: (run.offset() or 0) > published, "batches the standby lacks")
        primary.kill()
    finally:
        writers.stop()
    if safe:
        # As if 'set failover --promote' had been killed -9 once it pointed the set there.
        point_at_standby(zookeeper, run.cluster, standby)
        output = run.failover(standby, succeeds=False)
        assert "an interrupted 'set failover --promote'" in output, output
    standby.promote()
    output = run.failover(standby)
    if safe:
        assert "finishing an interrupted failover" in output, output
    if not safe:
        wait_until(lambda: not run.relay.alive(), "the relay to stop on the divergence", 120)
        log = run.relay.output()
        assert "which this database does not have" in log, log[-3000:]
        assert "--accept-divergence" in log and "set verify" in log
        return
    after = Writers(standby.dsn(), "after")
    try:
        after.wait_committed(100)
    finally:
        after.stop()
    run.caught_up(standby.dsn())
    assert_same(standby.dsn(), target)
    assert run.relay.alive() and run.worker.alive(), "neither was restarted"
    assert run.worker.stop() == 0 and run.relay.stop() == 0
