"""Statement triggers capture exactly what committed, in order; inheritance trees get row triggers.

Each test runs with both implementations of the capture function (PGSHOVEL_CAPTURE),
so the PL/pgSQL twin keeps the same guarantees as the C trigger.
"""

from __future__ import annotations

import psycopg2
import pytest
from kazoo.client import KazooClient

from pgshovel.admin import capture_library, planning, twophase
from pgshovel.admin.plan import render
from pgshovel.cluster.sets import parse_set_document
from pgshovel.protocol import stream_pb2
from tests.integration.admin._admin import context, execute, rows
from tests.integration.capture._capture import SET, captured, install, ints

pytestmark = pytest.mark.integration

Mutation = stream_pb2.Mutation

IMPLEMENTATIONS = ("c", "plpgsql")


@pytest.fixture(params=IMPLEMENTATIONS)
def implementation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(capture_library.ENVIRONMENT, request.param)
    return str(request.param)


def _summary(dsn: str, cluster: str) -> list[tuple[str, int | None, int | None]]:
    """(operation, old id, new id) of every mutation, in queue order."""
    return [
        (
            Mutation.Operation.Name(m.operation),
            ints(m.old)["id"] if m.HasField("old") else None,
            ints(m.new)["id"] if m.HasField("new") else None,
        )
        for m in captured(dsn, cluster)
    ]


def test_statements_in_order_rows_in_order_rollbacks_leave_nothing(
    database: str, cluster_name: str, zookeeper: KazooClient, implementation: str
) -> None:
    execute(database, "CREATE TABLE t (id int PRIMARY KEY, n int)")
    execute(database, "CREATE TABLE other (id int PRIMARY KEY, n int)")
    install(zookeeper, cluster_name, database, [{"name": "t"}, {"name": "other"}])
    execute(
        database,
        "BEGIN; INSERT INTO t SELECT g, 0 FROM generate_series(1, 1500) g;"
        " INSERT INTO other VALUES (1, 0);"
        " UPDATE t SET n = 1 WHERE mod(id, 2) = 0;"
        # A savepoint rolled back takes its statements' events with it, not the rest.
        " SAVEPOINT s; UPDATE t SET n = 2; DELETE FROM other; ROLLBACK TO SAVEPOINT s;"
        " DELETE FROM t WHERE id > 1498; COMMIT",
    )
    execute(database, "BEGIN; UPDATE t SET n = 3; ROLLBACK")
    # A statement that changes no row, and one that leaves every row as it was: no event.
    execute(database, "UPDATE t SET n = 4 WHERE id < 0")
    execute(database, "UPDATE t SET n = n WHERE id = 1")

    summary = _summary(database, cluster_name)
    assert summary == [
        *(("INSERT", None, i) for i in range(1, 1501)),
        ("INSERT", None, 1),
        *(("UPDATE", i, i) for i in range(2, 1501, 2)),
        ("DELETE", 1499, None),
        ("DELETE", 1500, None),
    ]
    mutations = captured(database, cluster_name)
    assert {m.table for m in mutations[:1500]} == {"t"} and mutations[1500].table == "other"
    assert len({m.transaction for m in mutations}) == 1


def test_a_captured_table_cannot_silently_join_an_inheritance_tree(
    database: str, cluster_name: str, zookeeper: KazooClient, implementation: str
) -> None:
    execute(database, "CREATE TABLE t (id int PRIMARY KEY, n int)")
    execute(database, "CREATE TABLE p (id int, n int)")
    execute(database, "CREATE TABLE ranged (id int, n int) PARTITION BY RANGE (id)")
    install(zookeeper, cluster_name, database, [{"name": "t"}])
    trigger = f"pgshovel_{cluster_name}_{SET}"
    # Becoming a child or a partition would hide the rows a statement on the parent
    # changes from the table's statement triggers: PostgreSQL refuses, naming the trigger.
    for statement in (
        "ALTER TABLE t INHERIT p",
        "ALTER TABLE ranged ATTACH PARTITION t FOR VALUES FROM (0) TO (10)",
    ):
        with pytest.raises(psycopg2.Error, match=f'trigger "{trigger}" prevents table "t"'):
            execute(database, statement)

    # Becoming a parent is not refused: every captured write then fails, naming the table
    # and the remedy, until set update gives it row triggers.
    execute(database, "INSERT INTO t VALUES (1, 0)")
    execute(database, "CREATE TABLE kid () INHERITS (t)")
    refused = r'table "public\.t" is in an inheritance tree'
    with pytest.raises(psycopg2.Error, match=refused) as error:
        execute(database, "UPDATE ONLY t SET n = 1")
    assert "set update" in str(error.value)
    document = {"database": {"dsn": database}, "tables": [{"name": "t"}]}
    with context(zookeeper, cluster_name) as ctx:
        plan = planning.plan_set_update(ctx, SET, parse_set_document(document, "test"))
        twophase.execute(plan, ctx.connections, zookeeper)
    assert _levels(database, "t") == {"ROW"}
    execute(database, "UPDATE ONLY t SET n = 1")
    execute(database, "INSERT INTO kid VALUES (2, 0)")
    execute(database, "UPDATE t SET n = 5")  # reaches kid's row: not t's, not captured as t's
    assert _summary(database, cluster_name) == [
        ("INSERT", None, 1),
        ("UPDATE", 1, 1),
        ("UPDATE", 1, 1),
    ]


def test_tables_with_triggers_of_their_own_get_row_triggers(
    database: str, cluster_name: str, zookeeper: KazooClient, implementation: str
) -> None:
    execute(database, "CREATE TABLE parent (id int PRIMARY KEY, n int)")
    execute(
        database,
        "CREATE TABLE child (id int PRIMARY KEY, parent int REFERENCES parent ON DELETE CASCADE,"
        " n int)",
    )
    # A user trigger firing after parent's rows change, changing another captured table:
    # parent gets row triggers; child (foreign key triggers only: internal) statement ones.
    execute(
        database,
        "CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " UPDATE child SET n = n + 1 WHERE parent = NEW.id;"
        " RETURN NULL; END $$",
    )
    execute(
        database,
        "CREATE TRIGGER zz_touch AFTER UPDATE ON parent FOR EACH ROW EXECUTE FUNCTION touch()",
    )
    install(zookeeper, cluster_name, database, [{"name": "parent"}, {"name": "child"}])
    assert _levels(database, "parent") == {"ROW"}
    assert _levels(database, "child") == {"ROW", "STATEMENT"}  # the set's trigger: a guard
    execute(database, "INSERT INTO parent VALUES (1, 0), (2, 0)")
    execute(database, "INSERT INTO child VALUES (10, 1, 0), (20, 2, 0)")
    execute(database, "UPDATE parent SET n = 1")
    execute(database, "DELETE FROM parent WHERE id = 1")

    def summary() -> list[tuple[str, str, dict[str, int | None]]]:
        return [
            (
                Mutation.Operation.Name(m.operation),
                m.table,
                ints(m.old if m.HasField("old") else m.new),
            )
            for m in captured(database, cluster_name)
        ]

    # Row triggers write row by row, between the rows' other triggers (by name); a
    # statement trigger when its statement ends, before its foreign key actions.
    assert summary() == [
        ("INSERT", "parent", {"id": 1, "n": 0}),
        ("INSERT", "parent", {"id": 2, "n": 0}),
        ("INSERT", "child", {"id": 10, "parent": 1, "n": 0}),
        ("INSERT", "child", {"id": 20, "parent": 2, "n": 0}),
        ("UPDATE", "parent", {"id": 1, "n": 0}),
        ("UPDATE", "child", {"id": 10, "parent": 1, "n": 0}),
        ("UPDATE", "parent", {"id": 2, "n": 0}),
        ("UPDATE", "child", {"id": 20, "parent": 2, "n": 0}),
        ("DELETE", "parent", {"id": 1, "n": 1}),
        ("DELETE", "child", {"id": 10, "parent": 1, "n": 1}),
    ]

    # A trigger added later to a table with statement triggers stops its writes, loudly,
    # until set update gives it row triggers.
    execute(
        database,
        "CREATE TRIGGER later AFTER INSERT ON child FOR EACH ROW EXECUTE FUNCTION touch()",
    )
    with pytest.raises(psycopg2.Error, match='has trigger "later", which fires after') as error:
        execute(database, "INSERT INTO child VALUES (30, 2, 0)")
    assert "set update" in str(error.value)
    document = {"database": {"dsn": database}, "tables": [{"name": "parent"}, {"name": "child"}]}
    with context(zookeeper, cluster_name) as ctx:
        plan = planning.plan_set_update(ctx, SET, parse_set_document(document, "test"))
        assert (
            "  unchanged  public.child: row triggers reinstalled (its trigger 'later' fires "
            "after its rows change)"
        ) in render(plan, lambda dsn, statement: "").splitlines()
        twophase.execute(plan, ctx.connections, zookeeper)
    assert _levels(database, "child") == {"ROW"}
    execute(database, "INSERT INTO child VALUES (30, 2, 0)")
    assert summary()[-1] == ("INSERT", "child", {"id": 30, "parent": 2, "n": 0})


def _levels(dsn: str, table: str) -> set[str]:
    """The levels of the pgshovel INSERT/UPDATE/DELETE triggers on ``table``."""
    return {
        "ROW" if row_level else "STATEMENT"
        for (row_level,) in rows(
            dsn,
            "SELECT tgtype & 1 = 1 FROM pg_trigger WHERE tgrelid = %s::regclass "
            "AND tgname LIKE 'pgshovel%%' AND tgtype & 28 <> 0",
            (table,),
        )
    }
