"""The failover tests' stage: a primary and its streaming standby, the set, relay, worker, writers.

``servers`` runs a primary and a streaming standby of it (``start_server``)
with a keyed table (``accounts``), a keyed insert-only table (``ledger``) and an
unkeyed journal (a batch applied twice would show there as duplicate rows);
``start_run`` installs the set on the primary and starts the real relay and
worker into a target on the sandbox; ``Writers`` commit small transactions as
an application would (one refused by a read-only server may retry on the next).
"""

from __future__ import annotations

import os
import random
import shlex
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.errors
from kazoo.client import KazooClient
from psycopg2 import sql

from pgshovel.cluster import names
from pgshovel.cluster.sets import read_set
from pgshovel.protocol import configuration_pb2
from pgshovel.sandbox import SandboxConnection, Server, start_server, stop_server
from tests.integration.capture._capture import SET, install
from tests.integration.relay._relay import RelayProcess, topic_of, write_relay_yml

from ._scenario import Processes
from ._stack import WorkerProcess, wait_caught_up, wait_until, worker_state, write_replication_yml

ADMIN = Path(sys.executable).with_name("pgshovel-admin")
SCHEMA = """
CREATE TABLE accounts (id integer PRIMARY KEY, balance bigint NOT NULL, note text);
INSERT INTO accounts SELECT i, 0, 'start' FROM generate_series(1, 200) AS i;
CREATE TABLE ledger (writer text, n bigint, amount integer NOT NULL, PRIMARY KEY (writer, n));
CREATE TABLE journal (writer text NOT NULL, n bigint NOT NULL, note text);
"""
TABLES = ("accounts", "ledger", "journal")
ACCOUNTS = "SELECT id, balance, note FROM accounts ORDER BY id"
LEDGER = "SELECT writer, n, amount FROM ledger ORDER BY writer, n"
JOURNAL = "SELECT writer, n, note FROM journal ORDER BY writer, n, note"


@contextmanager
def running_servers(sandbox: SandboxConnection) -> Iterator[tuple[Server, Server]]:
    """A primary (with ``SCHEMA``) and its streaming standby, stopped at the end."""
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


def execute(dsn: str, *statements: str | sql.Composable) -> None:
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


def admin(sandbox: SandboxConnection, cluster: str, *arguments: str, succeeds: bool = True) -> str:
    """Run pgshovel-admin as an operator would (exit 0 or not, as expected); its output."""
    result = subprocess.run(
        [str(ADMIN), *arguments],
        env={
            **os.environ,
            "PGSHOVEL_CLUSTER": cluster,
            "PGSHOVEL_ZOOKEEPER_HOSTS": sandbox.zookeeper_hosts,
        },
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert (result.returncode == 0) == succeeds, result.stdout + result.stderr
    return result.stdout + result.stderr


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
                        cursor.execute(
                            "INSERT INTO ledger VALUES (%s, %s, %s)",
                            (f"{self.name}-{index}", n, rng.randint(1, 100)),
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
            [{"schema": "public", "name": table} for table in TABLES],
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
            300,  # Spark's start and the snapshot load, on a machine shared by many tests
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

    def admin(self, *arguments: str, succeeds: bool = True) -> str:
        """Run pgshovel-admin as an operator would; its stdout and stderr."""
        return admin(self.sandbox, self.cluster, *arguments, succeeds=succeeds)

    def failover(self, standby: Server, *options: str, succeeds: bool = True) -> str:
        return self.admin(
            "set", "failover", SET, "--to", standby.dsn(), *options, succeeds=succeeds
        )

    def run_printed(self, command: str) -> str:
        """Run a ``pgshovel-admin ...`` command line exactly as a message printed it."""
        words = shlex.split(command)
        assert words[0] == "pgshovel-admin", command
        return self.admin(*words[1:])

    def restart_relay(self, generation: int) -> None:
        """A new relay process after the last one stopped (log ``relay-<generation>.log``)."""
        assert not self.relay.alive()
        self.relay = RelayProcess(
            self.sandbox,
            self.cluster,
            self.relay_config,
            self.directory / f"relay-{generation}.log",
        )
        self.processes.append(self.relay)

    def dsn(self, zookeeper: KazooClient) -> str:
        """The set's DSN as ZooKeeper holds it."""
        return read_set(zookeeper, self.cluster, SET).database.dsn


def assert_same(source: str, target: str) -> None:
    assert rows(target, ACCOUNTS) == rows(source, ACCOUNTS)
    assert rows(target, LEDGER) == rows(source, LEDGER)
    # Sorted lists: the unkeyed journal compared as a multiset (no batch applied twice).
    assert rows(target, JOURNAL) == rows(source, JOURNAL)


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


def read_only(server: Server) -> str:
    return str(rows(server.dsn(), "SHOW default_transaction_read_only")[0][0])
