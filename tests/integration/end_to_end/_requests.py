"""A running set for the tests of ``set resnapshot`` and ``set verify``: source, relay, worker.

``RequestStack.start`` creates the source's tables, installs the capture set,
and starts the real ``pgshovel-relay`` and ``pgshovel-replicate`` (PostgreSQL
target, small chunks) with logs under the test's directory; ``admin`` runs a
``pgshovel-admin set`` command as an operator would and returns its exit code
and output; ``caught_up`` waits until the copy holds everything committed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg2
from kazoo.client import KazooClient
from psycopg2 import sql

from pgshovel.sandbox import SandboxConnection
from tests.integration.capture._capture import SET, install
from tests.integration.relay._relay import RelayProcess, topic_of, write_relay_yml

from ._stack import WorkerProcess, wait_caught_up, wait_until, write_replication_yml
from ._targets import postgres_progress, source_columns

ADMIN = Path(sys.executable).with_name("pgshovel-admin")


def run_sql(dsn: str, *statements: str, replica: bool = False) -> None:
    """Run statements in one transaction; ``replica``: with triggers off
    (``session_replication_role = replica``, as a bulk loader or a restore does)."""
    connection = psycopg2.connect(dsn)
    try:
        with connection, connection.cursor() as cursor:
            if replica:
                cursor.execute("SET LOCAL session_replication_role = replica")
            for statement in statements:
                cursor.execute(statement)
    finally:
        connection.close()


@dataclass
class RequestStack:
    """A source with a capture set, its relay and its worker into a PostgreSQL copy."""

    sandbox: SandboxConnection
    cluster: str
    source: str
    target: str
    directory: Path
    processes: list[Any]
    kafka_config: dict[str, str]
    workers: list[WorkerProcess] = field(default_factory=list)

    @property
    def worker(self) -> WorkerProcess:
        return self.workers[-1]

    def start(
        self,
        zookeeper: KazooClient,
        schema: Sequence[str],
        tables: Sequence[Mapping[str, Any]],
        *,
        allow_unkeyed: bool = False,
    ) -> None:
        run_sql(self.source, *schema)
        entries = [dict(table) for table in tables]
        install(zookeeper, self.cluster, self.source, entries, allow_unkeyed=allow_unkeyed)
        self.configuration = write_replication_yml(
            self.directory / "replication.yml",
            self.kafka_config,
            topic_of(self.cluster),
            {
                "path": "pgshovel.replication.targets.postgresql:PostgresTarget",
                "configuration": {"dsn": self.target},
            },
            ranges_per_table=2,
        )
        text = self.configuration.read_text() + "snapshots: {rows_per_chunk: 100, parallel: 2}\n"
        self.configuration.write_text(text)
        relay = RelayProcess(
            self.sandbox,
            self.cluster,
            write_relay_yml(self.directory, self.sandbox),
            self.directory / "relay.log",
        )
        self.processes.append(relay)
        self.start_worker()
        wait_until(
            lambda: self.progress()[0] is not None,
            "the worker to stream",
            180,
            self.worker.alive,
            self.worker.output,
        )

    def start_worker(self) -> WorkerProcess:
        worker = WorkerProcess(
            self.sandbox, self.cluster, self.configuration, self.directory / "worker.log"
        )
        self.processes.append(worker)
        self.workers.append(worker)
        return worker

    def progress(self) -> tuple[int | None, int]:
        """(stored stream offset or None, snapshot tasks left)."""
        return postgres_progress(self.target, self.cluster)

    def environment(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "PGSHOVEL_CLUSTER": self.cluster,
            "PGSHOVEL_ZOOKEEPER_HOSTS": self.sandbox.zookeeper_hosts,
            **extra,
        }

    def admin(
        self, *words: str, environment: Mapping[str, str] | None = None, timeout: float = 300
    ) -> tuple[int, str]:
        """``pgshovel-admin set WORDS...``: its exit code and output (stdout and stderr)."""
        done = subprocess.run(
            [str(ADMIN), "set", *words],
            env=dict(environment or self.environment()),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return done.returncode, done.stdout + done.stderr

    def caught_up(self) -> None:
        """Wait until the relay drained the queue and the copy applied the whole topic."""
        wait_caught_up(
            self.source,
            self.cluster,
            self.kafka_config,
            topic_of(self.cluster),
            lambda: self.progress()[0],
            self.worker.alive,
            self.worker.output,
        )

    def idle(self) -> None:
        """Wait until no snapshot task is left and the copy is caught up."""
        wait_until(
            lambda: self.progress()[1] == 0,
            "no task left",
            180,
            self.worker.alive,
            self.worker.output,
        )
        self.caught_up()

    def rows(self, table: str) -> tuple[list[Any], list[Any]]:
        """(source rows, copy rows) of ``public.table``, sorted, duplicates kept; the source's
        in the copy's columns (a set may capture some columns only)."""
        columns = [name for name, _ in source_columns(self.target, table)]
        return _rows(self.source, table, columns), _rows(self.target, table, columns)

    def assert_equal(self, *tables: str) -> None:
        for table in tables:
            source, copy = self.rows(table)
            assert copy == source, f"{table}: the copy differs from the source"


def _rows(dsn: str, table: str, columns: Sequence[str]) -> list[tuple[str | None, ...]]:
    connection = psycopg2.connect(dsn)
    try:
        with connection, connection.cursor() as cursor:
            cursor.execute(
                sql.SQL("SELECT {} FROM {}").format(
                    sql.SQL(", ").join(
                        sql.SQL("{}::text").format(sql.Identifier(c)) for c in columns
                    ),
                    sql.Identifier("public", table),
                )
            )
            return sorted((tuple(row) for row in cursor.fetchall()), key=repr)
    finally:
        connection.close()


def make_stack(
    sandbox: SandboxConnection,
    make_database: Callable[[str], str],
    cluster: str,
    directory: Path,
    processes: list[Any],
    kafka_config: dict[str, str],
) -> RequestStack:
    return RequestStack(
        sandbox,
        cluster,
        make_database("source"),
        make_database("target"),
        directory,
        processes,
        kafka_config,
    )


__all__ = ["SET", "RequestStack", "make_stack", "run_sql"]
