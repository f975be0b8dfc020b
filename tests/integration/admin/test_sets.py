"""pgshovel-admin against the sandbox: what each command (and its --dry-run) changes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from psycopg2.extensions import make_dsn, parse_dsn

from pgshovel.cluster.versions import set_version
from pgshovel.protocol import configuration_pb2
from pgshovel.sandbox import SandboxConnection
from tests.integration.admin._admin import (
    admin,
    execute,
    failed,
    ok,
    prepared_transactions,
    rows,
    triggers,
    write_set,
)

pytestmark = pytest.mark.integration

#: the suffixes of a set's statement triggers on a plain table
EVENTS = (".insert", ".update", ".delete")

SCHEMA = """
CREATE TABLE orders (id serial PRIMARY KEY, status text, note text);
CREATE TABLE lines (order_id int, line int, qty int, PRIMARY KEY (order_id, line));
CREATE TABLE log (message text);
"""


def _read_set(
    zookeeper: KazooClient, cluster: str, name: str
) -> configuration_pb2.ReplicationSetConfiguration:
    data, _stat = zookeeper.get(f"/{cluster}/sets/{name}")
    return configuration_pb2.ReplicationSetConfiguration.FromString(data)


def _queues(dsn: str) -> list[str]:
    if not rows(dsn, "SELECT 1 FROM pg_extension WHERE extname = 'pgq'"):
        return []
    return [row[0] for row in rows(dsn, "SELECT queue_name FROM pgq.queue")]


def test_set_lifecycle_and_dry_runs(
    sandbox: SandboxConnection,
    database: str,
    cluster_name: str,
    zookeeper: KazooClient,
    tmp_path: Path,
) -> None:
    execute(database, SCHEMA)
    dsn = database
    set_file = write_set(tmp_path, dsn, [{"name": "orders"}, {"name": "lines"}])
    trigger = f"pgshovel_{cluster_name}_app"

    assert "dry run" in ok(admin(sandbox, cluster_name, "cluster", "initialize", "--dry-run"))
    assert zookeeper.exists(f"/{cluster_name}") is None
    ok(admin(sandbox, cluster_name, "cluster", "initialize"))
    assert "already initialized" in failed(admin(sandbox, cluster_name, "cluster", "initialize"))

    # A DSN with a password would put it into ZooKeeper: refused, and never printed.
    secret_file = write_set(
        tmp_path, make_dsn(database, password="hunter2"), [{"name": "orders"}], name="secret.yml"
    )
    for extra in (["--dry-run"], []):
        reason = failed(admin(sandbox, cluster_name, "set", "create", "app", secret_file, *extra))
        assert "set 'app': database.dsn" in reason and "holds a password" in reason
        assert "passfile" in reason and "hunter2" not in reason
    assert zookeeper.exists(f"/{cluster_name}/sets/app") is None
    assert triggers(database) == set()

    # A dry run prints a summary: tables, their triggers, grants, how much SQL; no SQL.
    summary = ok(admin(sandbox, cluster_name, "set", "create", "app", set_file, "--dry-run"))
    lines = summary.splitlines()
    assert lines[1:4] == [
        "set 'app': 2 table(s): 2 added",
        "  added  public.orders: primary key (id), every column; statement triggers installed",
        "  added  public.lines: primary key (order_id, line), every column; statement triggers "
        "installed",
    ]
    assert lines[4] == (
        "grants: EXECUTE on the 5 SECURITY DEFINER functions of schema "
        f"'pgshovel_{cluster_name}' revoked from PUBLIC (as on every install)"
    )
    assert lines[5].startswith("grants: a relay or worker logging in as a role of its own")
    assert re.fullmatch(
        r"database '.*' \(one two-phase transaction; capture function LANGUAGE c\): "
        r"\d+ statements",
        lines[6],
    )
    assert f"  create /{cluster_name}/sets/app: ReplicationSetConfiguration version " in summary
    assert lines[-2:] == ["sql: add --sql to print the statements", "dry run: nothing was changed"]
    assert "CREATE TRIGGER" not in summary and len(lines) < 20
    # --sql adds every statement, after the same summary.
    plan = ok(admin(sandbox, cluster_name, "set", "create", "app", set_file, "--dry-run", "--sql"))
    assert (
        f'CREATE TRIGGER "{trigger}.update" AFTER UPDATE ON "public"."orders" REFERENCING '
        'OLD TABLE AS "pgshovel_old" NEW TABLE AS "pgshovel_new" FOR EACH STATEMENT' in plan
    )
    assert plan.splitlines()[:6] == lines[:6]
    assert f"create /{cluster_name}/sets/app" in plan
    assert "hunter2" not in plan + summary
    refused = admin(sandbox, cluster_name, "set", "create", "app", set_file, "--sql")
    assert refused.returncode == 2 and "--sql prints the statements of a plan: add --dry-run" in (
        refused.stderr
    )
    assert zookeeper.exists(f"/{cluster_name}/sets/app") is None
    assert triggers(database) == set() and _queues(database) == []

    ok(admin(sandbox, cluster_name, "set", "create", "app", set_file))
    stored = _read_set(zookeeper, cluster_name, "app")
    assert [table.name for table in stored.tables] == ["orders", "lines"]
    version = set_version(stored)
    assert triggers(database) == {
        ("public", table, name)
        for table in ("orders", "lines")
        for name in (trigger, *(trigger + event for event in EVENTS), trigger + "_truncate")
    }
    assert _queues(database) == [f"pgshovel.{cluster_name}.app"]
    assert "already exists" in failed(
        admin(sandbox, cluster_name, "set", "create", "app", set_file)
    )

    listing = ok(admin(sandbox, cluster_name, "set", "list"))
    assert listing.startswith(f"app\t{version}\t2 table(s)")
    inspected = ok(admin(sandbox, cluster_name, "set", "inspect", "app"))
    assert f"version: {version}" in inspected
    assert "public.orders: installed" in inspected and "public.lines: installed" in inspected
    assert "hunter2" not in listing + inspected
    cluster_report = ok(admin(sandbox, cluster_name, "cluster", "inspect"))
    assert f"app: version {version}" in cluster_report

    # A set stored with a password (by an older pgshovel): shown masked, refused as an
    # update target, and 'set update' with a DSN without one removes it.
    legacy = _read_set(zookeeper, cluster_name, "app")
    legacy.database.dsn = make_dsn(database, password="hunter2")
    zookeeper.set(f"/{cluster_name}/sets/app", legacy.SerializeToString())
    assert "hunter2" not in ok(admin(sandbox, cluster_name, "set", "inspect", "app"))
    reason = failed(admin(sandbox, cluster_name, "set", "update", "app", secret_file))
    assert "holds a password" in reason and "hunter2" not in reason
    version = set_version(legacy)

    # Update: lines leaves the set, orders captures two columns only.
    update_file = write_set(
        tmp_path, dsn, [{"name": "orders", "columns": ["id", "status"]}], name="update.yml"
    )
    summary = ok(admin(sandbox, cluster_name, "set", "update", "app", update_file, "--dry-run"))
    assert summary.splitlines()[1:4] == [
        "set 'app': 2 table(s): 1 changed, 1 removed",
        "  changed  public.orders: every column -> columns (id, status); statement triggers "
        "reinstalled",
        "  removed  public.lines: triggers dropped",
    ]
    assert "DROP TRIGGER" not in summary
    plan = ok(
        admin(sandbox, cluster_name, "set", "update", "app", update_file, "--dry-run", "--sql")
    )
    assert f'DROP TRIGGER IF EXISTS "{trigger}" ON "public"."lines"' in plan
    assert set_version(_read_set(zookeeper, cluster_name, "app")) == version
    assert ("public", "lines", trigger) in triggers(database)

    ok(admin(sandbox, cluster_name, "set", "update", "app", update_file))
    updated = _read_set(zookeeper, cluster_name, "app")
    assert list(updated.tables[0].columns) == ["id", "status"]
    assert "hunter2" not in updated.database.dsn
    assert {table for _schema, table, _name in triggers(database)} == {"orders"}
    definition = rows(
        database,
        "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgname = %s",
        (trigger + ".update",),
    )[0][0]
    # A statement trigger has no column list: it compares the captured columns itself.
    assert "FOR EACH STATEMENT" in definition and "UPDATE OF" not in definition
    assert set_version(updated) in definition and '{"id","status"}' in definition
    inspected = ok(admin(sandbox, cluster_name, "set", "inspect", "app"))
    assert "public.orders: installed" in inspected and "lines" not in inspected

    # An out-of-band trigger change shows in inspect.
    execute(database, f'ALTER TABLE orders DISABLE TRIGGER "{trigger}"')
    assert "public.orders: triggers disabled" in ok(
        admin(sandbox, cluster_name, "set", "inspect", "app")
    )

    summary = ok(admin(sandbox, cluster_name, "set", "drop", "app", "--dry-run"))
    assert summary.splitlines()[1:3] == [
        "set 'app': 1 table(s): 1 removed",
        "  removed  public.orders: triggers dropped",
    ]
    assert f"delete /{cluster_name}/sets/app" in summary and "pgq.drop_queue" not in summary
    plan = ok(admin(sandbox, cluster_name, "set", "drop", "app", "--dry-run", "--sql"))
    assert "pgq.drop_queue" in plan and f"delete /{cluster_name}/sets/app" in plan
    assert zookeeper.exists(f"/{cluster_name}/sets/app") is not None
    ok(admin(sandbox, cluster_name, "set", "drop", "app"))
    assert zookeeper.exists(f"/{cluster_name}/sets/app") is None
    assert triggers(database) == set() and _queues(database) == []
    assert ok(admin(sandbox, cluster_name, "set", "list")) == "\n"
    assert "does not exist" in failed(admin(sandbox, cluster_name, "set", "inspect", "app"))
    assert prepared_transactions(database) == []


def test_invalid_requests_change_nothing(
    sandbox: SandboxConnection,
    database: str,
    cluster_name: str,
    zookeeper: KazooClient,
    tmp_path: Path,
) -> None:
    execute(database, SCHEMA)
    assert "not initialized" in failed(
        admin(
            sandbox,
            cluster_name,
            "set",
            "create",
            "app",
            write_set(tmp_path, database, [{"name": "orders"}]),
        )
    )
    ok(admin(sandbox, cluster_name, "cluster", "initialize"))

    missing = write_set(tmp_path, database, [{"name": "orders"}, {"name": "nope"}], name="m.yml")
    reason = failed(admin(sandbox, cluster_name, "set", "create", "app", missing))
    assert "'public'.'nope' does not exist" in reason

    unkeyed = write_set(tmp_path, database, [{"name": "log"}], name="u.yml")
    reason = failed(admin(sandbox, cluster_name, "set", "create", "app", unkeyed))
    assert "'public'.'log' has no primary key" in reason and "allow_unkeyed" in reason

    bad_column = write_set(
        tmp_path, database, [{"name": "orders", "columns": ["id", "x"]}], name="c.yml"
    )
    assert "no column 'x'" in failed(
        admin(sandbox, cluster_name, "set", "create", "app", bad_column)
    )

    broken = tmp_path / "broken.yml"
    broken.write_text("database: {dsn: x}\ntables: [{name: t, colums: [a]}]\n", encoding="utf-8")
    reason = failed(admin(sandbox, cluster_name, "set", "create", "app", broken))
    assert str(broken) in reason and "colums" in reason

    assert "invalid set name" in failed(admin(sandbox, cluster_name, "set", "drop", "a/b"))
    assert zookeeper.get_children(f"/{cluster_name}/sets") == []
    assert triggers(database) == set()
    assert rows(database, "SELECT 1 FROM pg_namespace WHERE nspname LIKE 'pgshovel%%'") == []

    # allow_unkeyed: the table is captured with no key columns.
    allowed = write_set(tmp_path, database, [{"name": "log"}], allow_unkeyed=True, name="a.yml")
    ok(admin(sandbox, cluster_name, "set", "create", "app", allowed))
    definition = rows(
        database,
        "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgname = %s",
        (f"pgshovel_{cluster_name}_app",),
    )[0][0]
    assert "'[]'" in definition


def test_a_client_key_passphrase_stays_out_of_zookeeper_and_a_service_carries_it(
    sandbox: SandboxConnection,
    database: str,
    cluster_name: str,
    zookeeper: KazooClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """sslpassword= is a secret like password=: refused in a set's DSN, masked where shown;
    the remedy the refusal names (a service in pg_service.conf) is carried out to the end."""
    execute(database, SCHEMA)
    ok(admin(sandbox, cluster_name, "cluster", "initialize"))
    secret = "opensesame-" + cluster_name
    in_dsn = write_set(
        tmp_path, make_dsn(database, sslpassword=secret), [{"name": "orders"}], name="ssl.yml"
    )
    for extra in (["--dry-run"], []):
        reason = failed(admin(sandbox, cluster_name, "set", "create", "app", in_dsn, *extra))
        assert "holds a secret (sslpassword=...)" in reason and secret not in reason
        assert "service=NAME" in reason and "pg_service.conf" in reason
    assert zookeeper.exists(f"/{cluster_name}/sets/app") is None

    # The remedy: the passphrase in a service definition on this machine, the set names it.
    service_file = tmp_path / "pg_service.conf"
    lines = [f"{key}={value}" for key, value in parse_dsn(database).items()]
    service_file.write_text(
        "[pgshovel_test]\n" + "\n".join([*lines, f"sslpassword={secret}"]) + "\n"
    )
    monkeypatch.setenv("PGSERVICEFILE", str(service_file))
    by_service = write_set(tmp_path, "service=pgshovel_test", [{"name": "orders"}], name="s.yml")
    ok(admin(sandbox, cluster_name, "set", "create", "app", by_service))
    data, _ = zookeeper.get(f"/{cluster_name}/sets/app")
    assert secret.encode() not in data
    assert "public.orders: installed" in ok(admin(sandbox, cluster_name, "set", "inspect", "app"))

    # A set stored with one by an older pgshovel: masked in every listing, with a warning.
    legacy = _read_set(zookeeper, cluster_name, "app")
    legacy.database.dsn = make_dsn(database, sslpassword=secret)
    zookeeper.set(f"/{cluster_name}/sets/app", legacy.SerializeToString())
    shown = ok(admin(sandbox, cluster_name, "set", "inspect", "app"))
    shown += ok(admin(sandbox, cluster_name, "set", "list"))
    shown += ok(admin(sandbox, cluster_name, "cluster", "inspect"))
    assert secret not in shown and "keeps a secret (sslpassword=...)" in shown
