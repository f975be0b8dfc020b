"""Schema events say what DDL did to the rows, and capture that stopped is never silent.

Real PostgreSQL with PgQ: the set's queue is decoded as the relay decodes it.
A type change run inside a function (a migration tool's way), a domain's
volatile default and a renamed enum label make the copy read the table again;
an ALTER TABLE of a parent announces its children; a table dropped and created
again, or the set's triggers disabled, stop decoding with an error naming the
table and the remedy, and the remedy (``set update``, ``ENABLE TRIGGER``) lets
it go on; ``set inspect`` tells a renamed, dropped or recreated table apart.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kazoo.client import KazooClient

from pgshovel.admin import planning, twophase
from pgshovel.cluster.sets import parse_set_document
from pgshovel.errors import SchemaError
from pgshovel.protocol import stream_pb2
from pgshovel.sandbox import SandboxConnection
from tests.integration.admin._admin import admin, context, execute, ok, rows, write_set
from tests.integration.capture._capture import SET, captured_messages, install, ints

pytestmark = pytest.mark.integration

SchemaChange = stream_pb2.SchemaChange


def changes(dsn: str, cluster: str) -> list[SchemaChange]:
    """Every schema change in the set's queue after the announcements of set create."""
    return [
        message.operation.schema_change
        for message in captured_messages(dsn, cluster)
        if message.operation.WhichOneof("operation") == "schema_change"
        and message.operation.schema_change.command != "pgshovel set create"
    ]


def altered(dsn: str, cluster: str) -> list[tuple[str, str, bool]]:
    """(table, command, rewrites_rows) of every ALTER schema change, in queue order."""
    return [
        (change.table, change.command, change.rewrites_rows)
        for change in changes(dsn, cluster)
        if change.kind == SchemaChange.ALTER
    ]


def update(zookeeper: KazooClient, cluster: str, dsn: str, tables: list[dict[str, str]]) -> None:
    document = {"database": {"dsn": dsn}, "tables": tables}
    with context(zookeeper, cluster) as ctx:
        plan = planning.plan_set_update(ctx, SET, parse_set_document(document, "test"))
        twophase.execute(plan, ctx.connections, zookeeper)


def test_a_type_change_whose_using_is_unknown_copies_the_table_again(
    database: str, cluster_name: str, zookeeper: KazooClient
) -> None:
    execute(database, "CREATE TABLE t (id int PRIMARY KEY, v int, w int, x int)")
    execute(database, "INSERT INTO t VALUES (1, 1, 1, 1)")
    install(zookeeper, cluster_name, database, [{"name": "t"}])
    # The statement itself, without USING: the copy replays the cast.
    execute(database, "ALTER TABLE t ALTER COLUMN x TYPE bigint")
    # A migration tool's function: the statement PostgreSQL got is "SELECT migrate()".
    execute(
        database,
        "CREATE FUNCTION migrate() RETURNS void LANGUAGE plpgsql AS $$ BEGIN"
        " ALTER TABLE t ALTER COLUMN v TYPE int USING v * 10;"
        " ALTER TABLE t ALTER COLUMN w TYPE bigint USING w * 10;"
        " ALTER TABLE t ADD COLUMN later int DEFAULT 7;"
        " END $$",
    )
    execute(database, "SELECT migrate()")
    execute(
        database,
        "DO $$ BEGIN EXECUTE 'ALTER TABLE t ALTER COLUMN x TYPE bigint USI' || 'NG x + 1'; END $$",
    )
    assert altered(database, cluster_name) == [
        ("t", "ALTER TABLE", False),
        ("t", "ALTER TABLE", True),  # int USING v * 10: same type, new values
        ("t", "ALTER TABLE", True),  # int -> bigint USING w * 10
        ("t", "ALTER TABLE", False),  # a constant default: no row rewritten
        ("t", "ALTER TABLE", True),  # built in a DO block
    ]
    added = [change for change in changes(database, cluster_name) if change.added_defaults]
    assert [(c.name, c.value.int64) for c in added[0].added_defaults] == [("later", 7)]


def test_a_domain_default_computed_per_row_copies_the_table_again(
    database: str, cluster_name: str, zookeeper: KazooClient
) -> None:
    execute(database, "CREATE TABLE t (id int PRIMARY KEY)")
    execute(database, "INSERT INTO t SELECT generate_series(1, 3)")
    execute(database, "CREATE DOMAIN stamp AS timestamptz DEFAULT clock_timestamp()")
    execute(database, "CREATE DOMAIN five AS integer DEFAULT 5")
    install(zookeeper, cluster_name, database, [{"name": "t"}])
    execute(database, "ALTER TABLE t ADD COLUMN at stamp")
    execute(database, "ALTER TABLE t ADD COLUMN n five")
    assert altered(database, cluster_name) == [
        ("t", "ALTER TABLE", True),
        ("t", "ALTER TABLE", False),
    ]
    last = changes(database, cluster_name)[-1]
    assert [(c.name, c.value.int64) for c in last.added_defaults] == [("n", 5)]


def test_a_renamed_enum_label_copies_again_every_table_whose_values_print_it(
    database: str, cluster_name: str, zookeeper: KazooClient
) -> None:
    execute(database, "CREATE TYPE mood AS ENUM ('sad', 'ok')")
    execute(database, "CREATE DOMAIN moody AS mood")
    execute(database, "CREATE TYPE pair AS (m mood, n int)")
    execute(database, "CREATE TABLE plain (id int PRIMARY KEY, m mood)")
    execute(database, "CREATE TABLE arrays (id int PRIMARY KEY, m mood[])")
    execute(database, "CREATE TABLE domains (id int PRIMARY KEY, m moody)")
    execute(database, "CREATE TABLE composites (id int PRIMARY KEY, p pair)")
    execute(database, "CREATE TABLE other (id int PRIMARY KEY, t text)")
    tables = ["plain", "arrays", "domains", "composites", "other"]
    install(zookeeper, cluster_name, database, [{"name": name} for name in tables])
    # A new label changes no existing value.
    execute(database, "ALTER TYPE mood ADD VALUE 'happy'")
    assert altered(database, cluster_name) == []
    execute(database, "ALTER TYPE mood RENAME VALUE 'sad' TO 'blue'")
    assert sorted(altered(database, cluster_name)) == [
        (name, "ALTER TYPE", True) for name in sorted(tables[:4])
    ]


def test_an_altered_parent_announces_its_children(
    database: str, cluster_name: str, zookeeper: KazooClient
) -> None:
    execute(database, "CREATE TABLE parent (id int PRIMARY KEY, v int)")
    execute(database, "CREATE TABLE child (PRIMARY KEY (id)) INHERITS (parent)")
    install(zookeeper, cluster_name, database, [{"name": "parent"}, {"name": "child"}])
    execute(database, "ALTER TABLE parent ADD COLUMN w int")
    execute(database, "INSERT INTO child VALUES (1, 2, 3)")
    assert sorted(altered(database, cluster_name)) == [
        ("child", "ALTER TABLE", False),
        ("parent", "ALTER TABLE", False),
    ]
    mutation = captured_messages(database, cluster_name)[-1].operation.mutation
    assert (mutation.table, ints(mutation.new)) == ("child", {"id": 1, "v": 2, "w": 3})


def test_a_table_created_again_stops_decoding_until_set_update(
    sandbox: SandboxConnection,
    database: str,
    cluster_name: str,
    zookeeper: KazooClient,
    tmp_path: Path,
) -> None:
    execute(database, "CREATE TABLE t (id int PRIMARY KEY, v int)")
    install(zookeeper, cluster_name, database, [{"name": "t"}])
    execute(database, "DROP TABLE t")
    report = ok(admin(sandbox, cluster_name, "set", "inspect", SET))
    assert "public.t: table dropped (its copy was dropped too)" in report
    execute(database, "CREATE TABLE t (id int PRIMARY KEY, v int)")
    execute(database, "INSERT INTO t VALUES (1, 1)")
    execute(database, "ALTER TABLE t ADD COLUMN w int")  # a second DDL: no second problem
    with pytest.raises(SchemaError) as raised:
        captured_messages(database, cluster_name)
    message = str(raised.value)
    assert "table 'public'.'t'" in message and "created again" in message
    assert f"run 'pgshovel-admin set update {SET} FILE'" in message
    report = ok(admin(sandbox, cluster_name, "set", "inspect", SET))
    assert "public.t: not captured: created again" in report

    # The remedy the error names, as a user runs it.
    ok(
        admin(
            sandbox,
            cluster_name,
            "set",
            "update",
            SET,
            write_set(tmp_path, database, [{"name": "t"}]),
        )
    )
    execute(database, "INSERT INTO t VALUES (2, 2)")
    messages = captured_messages(database, cluster_name)
    found = [
        (
            SchemaChange.Kind.Name(m.operation.schema_change.kind),
            bool(m.operation.schema_change.problem),
        )
        if m.operation.WhichOneof("operation") == "schema_change"
        else ("MUTATION", False)
        for m in messages
    ]
    assert found == [
        ("ANNOUNCE", False),
        ("DROP", False),
        ("ALTER", True),  # what the relay publishes before the remedy: the copy waits for it
        ("ANNOUNCE", False),
        ("MUTATION", False),
    ]
    assert messages[3].operation.schema_change.rewrites_rows, "the copy reads the table again"
    assert "public.t: installed" in ok(admin(sandbox, cluster_name, "set", "inspect", SET))


@pytest.mark.parametrize(
    "disable",
    [
        "ALTER TABLE t DISABLE TRIGGER ALL",
        "ALTER TABLE t DISABLE TRIGGER USER",
        'ALTER TABLE t DISABLE TRIGGER "{main}.insert"',
        'ALTER TABLE t ENABLE REPLICA TRIGGER "{main}_truncate"',
    ],
)
def test_disabled_capture_stops_decoding_until_the_triggers_fire_again(
    disable: str, database: str, cluster_name: str, zookeeper: KazooClient
) -> None:
    execute(database, "CREATE TABLE t (id int PRIMARY KEY, v int)")
    install(zookeeper, cluster_name, database, [{"name": "t"}])
    main = f"pgshovel_{cluster_name}_{SET}"
    execute(database, "ALTER TABLE t DISABLE TRIGGER ALL; ALTER TABLE t ENABLE TRIGGER ALL")
    execute(database, f'ALTER TABLE t ENABLE ALWAYS TRIGGER "{main}"')  # fires: no problem
    assert [change.problem for change in changes(database, cluster_name)][-1] == ""

    execute(database, disable.format(main=main))
    execute(database, "INSERT INTO t VALUES (1, 1)")
    with pytest.raises(SchemaError) as raised:
        captured_messages(database, cluster_name)
    message = str(raised.value)
    assert "capture of table 'public'.'t'" in message and "is disabled" in message
    enable = message.split("enable them (")[1].split("), after which")[0]
    execute(database, enable)  # the remedy the error names, verbatim
    last = changes(database, cluster_name)[-2:]
    assert ["is disabled" in change.problem for change in last] == [True, False]
    assert last[1].rewrites_rows, "rows written meanwhile: the copy reads the table again"


def test_a_moved_primary_key_stops_decoding_until_set_update(
    database: str, cluster_name: str, zookeeper: KazooClient
) -> None:
    execute(database, "CREATE TABLE t (id int PRIMARY KEY, code text NOT NULL)")
    install(zookeeper, cluster_name, database, [{"name": "t"}])
    execute(database, "ALTER TABLE t DROP CONSTRAINT t_pkey, ADD PRIMARY KEY (code)")
    with pytest.raises(SchemaError, match=r"set update capture FILE"):
        captured_messages(database, cluster_name)
    update(zookeeper, cluster_name, database, [{"name": "t"}])
    fixed = changes(database, cluster_name)[-1]
    assert list(fixed.shape.key) == ["code"] and fixed.rewrites_rows


def test_inspect_names_where_a_renamed_table_went(
    sandbox: SandboxConnection,
    database: str,
    cluster_name: str,
    zookeeper: KazooClient,
    tmp_path: Path,
) -> None:
    execute(database, "CREATE TABLE t (id int PRIMARY KEY)")
    install(zookeeper, cluster_name, database, [{"name": "t"}])
    execute(database, "CREATE SCHEMA archive")
    execute(database, "ALTER TABLE t RENAME TO t2")
    execute(database, "ALTER TABLE t2 SET SCHEMA archive")
    report = ok(admin(sandbox, cluster_name, "set", "inspect", SET))
    assert (
        "public.t: renamed to archive.t2 (captured under its new name): write the new name "
        f"into the set's file and run 'pgshovel-admin set update {SET} FILE'"
    ) in report
    # The remedy it names.
    renamed = write_set(tmp_path, database, [{"schema": "archive", "name": "t2"}])
    ok(admin(sandbox, cluster_name, "set", "update", SET, renamed))
    report = ok(admin(sandbox, cluster_name, "set", "inspect", SET))
    assert "archive.t2: installed" in report and "public.t" not in report
    execute(database, "INSERT INTO archive.t2 VALUES (1)")
    mutation = captured_messages(database, cluster_name)[-1].operation.mutation
    assert (mutation.schema, mutation.table, ints(mutation.new)) == ("archive", "t2", {"id": 1})


def test_a_set_created_again_forgets_the_names_of_the_one_before(
    database: str, cluster_name: str, zookeeper: KazooClient
) -> None:
    execute(database, "CREATE TABLE t (id int PRIMARY KEY)")
    execute(database, "CREATE TABLE u (id int PRIMARY KEY)")
    install(zookeeper, cluster_name, database, [{"name": "t"}])
    with context(zookeeper, cluster_name) as ctx:
        twophase.execute(planning.plan_set_drop(ctx, SET), ctx.connections, zookeeper)
        document = {"database": {"dsn": database}, "tables": [{"name": "u"}]}
        plan = planning.plan_set_create(ctx, SET, parse_set_document(document, "test"))
        twophase.execute(plan, ctx.connections, zookeeper)
    execute(database, "DROP TABLE t")
    execute(database, "CREATE TABLE t (id int PRIMARY KEY)")
    assert [change.problem for change in changes(database, cluster_name)] == []


def test_only_the_owner_may_call_what_writes_schema_events(
    database: str, cluster_name: str, zookeeper: KazooClient
) -> None:
    execute(database, "CREATE TABLE t (id int PRIMARY KEY)")
    install(zookeeper, cluster_name, database, [{"name": "t"}])
    public = rows(
        database,
        "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = %s AND p.prosecdef "
        "AND p.prorettype NOT IN ('trigger'::regtype, 'event_trigger'::regtype) "
        "AND EXISTS (SELECT 1 FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a "
        "WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE') ORDER BY 1",
        (f"pgshovel_{cluster_name}",),
    )
    assert public == []
