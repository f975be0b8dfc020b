"""Two-phase changes: failures before the ZooKeeper commit leave everything as before."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import psycopg2
import pytest
from kazoo.client import KazooClient

from pgshovel.admin import planning, twophase
from pgshovel.cluster.sets import load_set_configuration
from pgshovel.errors import DatabaseError, VersionConflict
from pgshovel.protocol import configuration_pb2
from pgshovel.sandbox import SandboxConnection
from tests.integration.admin._admin import (
    admin,
    context,
    execute,
    failed,
    ok,
    prepared_transactions,
    rows,
    triggers,
    write_set,
)

pytestmark = pytest.mark.integration

MARKER = "BEGIN RETURN NULL; END -- old pgshovel"


def _create(sandbox: SandboxConnection, cluster: str, dsn: str, directory: Path, name: str) -> Path:
    execute(dsn, "CREATE TABLE IF NOT EXISTS orders (id int PRIMARY KEY, status text)")
    path = write_set(directory, dsn, [{"name": "orders"}], name=f"{name}.yml")
    ok(admin(sandbox, cluster, "set", "create", name, path))
    return path


def _function_source(dsn: str, cluster: str) -> str:
    return str(
        rows(
            dsn,
            "SELECT prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = %s AND p.proname = 'capture'",
            (f"pgshovel_{cluster}",),
        )[0][0]
    )


def test_concurrent_updates_one_wins_the_other_conflicts(
    sandbox: SandboxConnection,
    database: str,
    cluster_name: str,
    zookeeper: KazooClient,
    tmp_path: Path,
) -> None:
    ok(admin(sandbox, cluster_name, "cluster", "initialize"))
    _create(sandbox, cluster_name, database, tmp_path, "app")
    first = write_set(tmp_path, database, [{"name": "orders", "columns": ["id"]}], name="1.yml")
    second = write_set(
        tmp_path, database, [{"name": "orders", "columns": ["id", "status"]}], name="2.yml"
    )
    with context(zookeeper, cluster_name) as one, context(zookeeper, cluster_name) as two:
        # Both read the set before either commits.
        plan_one = planning.plan_set_update(one, "app", load_set_configuration(first))
        plan_two = planning.plan_set_update(two, "app", load_set_configuration(second))
        twophase.execute(plan_one, one.connections, zookeeper)
        with pytest.raises(VersionConflict, match="changed while this command ran"):
            twophase.execute(plan_two, two.connections, zookeeper)
    data, _stat = zookeeper.get(f"/{cluster_name}/sets/app")
    assert list(load_set_configuration(first).tables[0].columns) == ["id"]
    assert b"status" not in data
    definition = rows(
        database,
        "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgname = %s",
        (f"pgshovel_{cluster_name}_app",),
    )[0][0]
    # The winner's captured columns (a trigger argument, packing's after it): id only.
    assert """, '{"id"}'""" in definition and "status" not in definition
    assert prepared_transactions(database) == []


def test_connection_killed_after_prepare_rolls_everything_back(
    sandbox: SandboxConnection,
    database: str,
    cluster_name: str,
    zookeeper: KazooClient,
    tmp_path: Path,
) -> None:
    ok(admin(sandbox, cluster_name, "cluster", "initialize"))
    execute(database, "CREATE TABLE orders (id int PRIMARY KEY)")
    path = write_set(tmp_path, database, [{"name": "orders"}])

    def kill(prepared: Sequence[twophase.Prepared]) -> None:
        assert prepared_transactions(database) == [item.gid for item in prepared]
        for item in prepared:
            execute(sandbox.postgres_dsn, "SELECT pg_terminate_backend(%s)", (item.backend_pid,))

    with context(zookeeper, cluster_name) as ctx:
        plan = planning.plan_set_create(ctx, "app", load_set_configuration(path))
        with pytest.raises(
            DatabaseError, match=r"lost the connection.*rolled back; nothing was changed"
        ):
            twophase.execute(plan, ctx.connections, zookeeper, before_zookeeper_commit=kill)
    assert zookeeper.get_children(f"/{cluster_name}/sets") == []
    assert prepared_transactions(database) == []
    assert triggers(database) == set()
    assert rows(database, "SELECT 1 FROM pg_namespace WHERE nspname LIKE 'pgshovel%%'") == []


def test_upgrade_failing_on_one_database_changes_no_database(
    sandbox: SandboxConnection,
    make_database: object,
    cluster_name: str,
    zookeeper: KazooClient,
    tmp_path: Path,
) -> None:
    first, second = make_database("one"), make_database("two")  # type: ignore[operator]
    ok(admin(sandbox, cluster_name, "cluster", "initialize"))
    _create(sandbox, cluster_name, first, tmp_path, "one")
    _create(sandbox, cluster_name, second, tmp_path, "two")
    schema = f"pgshovel_{cluster_name}"
    # The first database runs an "older" capture function that upgrade must replace.
    execute(
        first,
        f"CREATE OR REPLACE FUNCTION {schema}.capture() RETURNS trigger "
        f"LANGUAGE plpgsql AS $${MARKER}$$",
    )
    # The second cannot take the new function: its capture() returns another type.
    execute(second, f"DROP FUNCTION {schema}.capture() CASCADE")
    execute(second, f"CREATE FUNCTION {schema}.capture() RETURNS int LANGUAGE sql AS 'SELECT 1'")
    _data, before = zookeeper.get(f"/{cluster_name}")

    summary = ok(admin(sandbox, cluster_name, "cluster", "upgrade", "--dry-run"))
    assert "2 database(s)" in summary and "RETURNS trigger" not in summary
    for name in ("one", "two"):
        assert f"set {name!r}: 1 table(s): 1 unchanged" in summary.splitlines()
    plan = ok(admin(sandbox, cluster_name, "cluster", "upgrade", "--dry-run", "--sql"))
    assert plan.count(".capture() RETURNS trigger") == 2 and "2 database(s)" in plan
    reason = failed(admin(sandbox, cluster_name, "cluster", "upgrade"))
    assert "cannot change return type" in reason and "nothing was changed" in reason
    assert zookeeper.get(f"/{cluster_name}")[1].version == before.version
    assert _function_source(first, cluster_name) == MARKER
    assert prepared_transactions(first) == [] and prepared_transactions(second) == []

    execute(second, f"DROP FUNCTION {schema}.capture()")
    ok(admin(sandbox, cluster_name, "cluster", "upgrade"))
    # make setup installs the C capture trigger, so both now run it (its symbol).
    assert _function_source(first, cluster_name) == "pgshovel_capture"
    assert _function_source(second, cluster_name) == "pgshovel_capture"
    assert zookeeper.get(f"/{cluster_name}")[1].version == before.version + 1
    # Upgrade installs every set's triggers again: those DROP FUNCTION ... CASCADE took too.
    for dsn, name in ((first, "one"), (second, "two")):
        trigger = f"pgshovel_{cluster_name}_{name}"
        assert {found for _schema, _table, found in triggers(dsn)} == {
            trigger,
            *(trigger + event for event in (".insert", ".update", ".delete")),
            trigger + "_truncate",
        }


def test_upgrade_refuses_a_downgrade_without_force(
    sandbox: SandboxConnection,
    database: str,
    cluster_name: str,
    zookeeper: KazooClient,
    tmp_path: Path,
) -> None:
    ok(admin(sandbox, cluster_name, "cluster", "initialize"))
    _create(sandbox, cluster_name, database, tmp_path, "app")
    future = configuration_pb2.ClusterConfiguration(version="99.0.0")
    zookeeper.set(f"/{cluster_name}", future.SerializeToString())
    assert "refusing to downgrade" in failed(admin(sandbox, cluster_name, "cluster", "upgrade"))
    ok(admin(sandbox, cluster_name, "cluster", "upgrade", "--force"))
    # Recorded again as this pgshovel's version.
    assert "version: 0.1.0" in ok(admin(sandbox, cluster_name, "cluster", "inspect"))


@pytest.fixture
def without_two_phase(tmp_path: Path) -> Iterator[str]:
    """A throwaway PostgreSQL with max_prepared_transactions = 0; its DSN."""
    bindir = Path(os.environ.get("PGSHOVEL_POSTGRES_BINDIR", "/usr/lib/postgresql/15/bin"))
    data = Path(tempfile.mkdtemp(prefix="pgshovel-no2pc-"))
    user = "postgres" if os.geteuid() == 0 else None
    if user is not None:
        shutil.chown(data, user)
    subprocess.run(
        [bindir / "initdb", "-D", data / "data", "-A", "trust", "-U", "postgres"],
        user=user,
        check=True,
        capture_output=True,
        timeout=120,
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [
            bindir / "postgres",
            "-D",
            data / "data",
            "-p",
            str(port),
            "-k",
            data,
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "max_prepared_transactions=0",
        ],
        user=user,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    dsn = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                psycopg2.connect(dsn).close()
                break
            except psycopg2.OperationalError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.2)
        yield dsn
    finally:
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(data, ignore_errors=True)


@pytest.mark.slow
def test_a_database_without_prepared_transactions_is_refused_first(
    sandbox: SandboxConnection,
    without_two_phase: str,
    cluster_name: str,
    zookeeper: KazooClient,
    tmp_path: Path,
) -> None:
    ok(admin(sandbox, cluster_name, "cluster", "initialize"))
    execute(without_two_phase, "CREATE TABLE orders (id int PRIMARY KEY)")
    path = write_set(tmp_path, without_two_phase, [{"name": "orders"}])
    reason = failed(admin(sandbox, cluster_name, "set", "create", "app", path))
    assert "max_prepared_transactions = 0" in reason and "nothing was changed" in reason
    assert zookeeper.get_children(f"/{cluster_name}/sets") == []
    assert triggers(without_two_phase) == set()
    assert rows(without_two_phase, "SELECT 1 FROM pg_extension WHERE extname = 'pgq'") == []
