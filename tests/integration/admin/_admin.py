"""Helpers for admin and capture integration tests: run pgshovel-admin, write set files, query."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg2
import yaml
from kazoo.client import KazooClient

from pgshovel.admin.connections import Connections
from pgshovel.admin.planning import Context
from pgshovel.cluster.zookeeper import ClusterStore
from pgshovel.sandbox import SandboxConnection

ADMIN = Path(sys.executable).with_name("pgshovel-admin")


def admin(
    sandbox: SandboxConnection, cluster: str, *args: str | Path
) -> subprocess.CompletedProcess[str]:
    """Run pgshovel-admin like a user would (environment variables for the globals)."""
    environment = dict(
        os.environ,
        PGSHOVEL_CLUSTER=cluster,
        PGSHOVEL_ZOOKEEPER_HOSTS=sandbox.zookeeper_hosts,
    )
    return subprocess.run(
        [str(ADMIN), *map(str, args)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def failed(result: subprocess.CompletedProcess[str]) -> str:
    """The one-line reason of a failed command."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def write_set(
    directory: Path,
    dsn: str,
    tables: Sequence[dict[str, Any]],
    *,
    allow_unkeyed: bool = False,
    name: str = "set.yml",
) -> Path:
    path = directory / name
    document = {"database": {"dsn": dsn}, "allow_unkeyed": allow_unkeyed, "tables": list(tables)}
    path.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    return path


def execute(dsn: str, statement: Any, args: Sequence[Any] = ()) -> None:
    conn = psycopg2.connect(dsn)
    try:
        conn.autocommit = True
        with conn.cursor() as cursor:
            cursor.execute(statement, args)
    finally:
        conn.close()


def rows(dsn: str, query: Any, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    conn = psycopg2.connect(dsn)
    try:
        conn.autocommit = True
        with conn.cursor() as cursor:
            cursor.execute(query, args)
            return list(cursor.fetchall())
    finally:
        conn.close()


def triggers(dsn: str) -> set[tuple[str, str, str]]:
    """Every pgshovel trigger in a database as (schema, table, trigger)."""
    found = rows(
        dsn,
        "SELECT n.nspname, c.relname, t.tgname FROM pg_trigger t "
        "JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE t.tgname LIKE 'pgshovel%%'",
    )
    return {(schema, table, name) for schema, table, name in found}


def prepared_transactions(dsn: str) -> list[str]:
    return [row[0] for row in rows(dsn, "SELECT gid FROM pg_prepared_xacts")]


@contextmanager
def context(zookeeper: KazooClient, cluster: str) -> Iterator[Context]:
    """A planning context on the sandbox (for tests that drive the Python API)."""
    with Connections() as connections:
        yield Context(cluster, ClusterStore(zookeeper, cluster), connections)
