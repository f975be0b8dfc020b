"""Checking configured tables against the catalog, and the trigger arguments."""

from __future__ import annotations

import json

from psycopg2 import sql

from pgshovel.admin.install import (
    TableCapture,
    drop_triggers,
    install_triggers,
    packing_argument,
    resolve_table,
    text_array_literal,
    trigger_arguments,
    trigger_names,
)
from pgshovel.admin.plan import DatabaseStep, Plan, ZooKeeperOperation, render
from pgshovel.cluster.names import CLUSTER_NAME_MAX, SET_NAME_MAX
from pgshovel.cluster.sets import PACKING_BYTES, PACKING_ROWS
from pgshovel.protocol import configuration_pb2
from pgshovel.source import Column, TableInfo

INFO = TableInfo(
    oid=1,
    schema="public",
    name="orders",
    columns=(
        Column("id", "bigint", "int8", not_null=True, number=1),
        Column("status", "text", "text", number=2),
    ),
    primary_key=("id",),
    unique_keys=(("id",),),
)


def test_resolving_keeps_the_configured_columns_for_the_trigger() -> None:
    table = configuration_pb2.TableConfiguration(
        schema="public", name="orders", columns=["id", "status"]
    )
    resolved = resolve_table(table, INFO, allow_unkeyed=False, database="dbname=app")
    assert resolved == TableCapture("public", "orders", ("id",), ("id", "status"))
    every = configuration_pb2.TableConfiguration(schema="public", name="orders")
    assert resolve_table(every, INFO, allow_unkeyed=False, database="x").columns == ()


def test_trigger_arguments_survive_hostile_names() -> None:
    table = TableCapture("s", "t", ('we"ird', "ключ"), ('we"ird', "ключ", "a\\b", "x,y"))
    queue, version, keys, columns = trigger_arguments("c", "s", "0123", table)
    assert (queue, version) == ("pgshovel.c.s", "0123")
    assert json.loads(keys) == ['we"ird', "ключ"]
    assert columns == '{"we\\"ird","ключ","a\\\\b","x,y"}'
    assert text_array_literal([]) == "{}"


def test_render_shows_every_statement_and_operation_without_passwords() -> None:
    plan = Plan(
        summary="create set 's'",
        cluster="c",
        databases=(DatabaseStep("dbname=app password=hunter2", ("S1", "S2")),),  # type: ignore[arg-type]
        zookeeper=(ZooKeeperOperation("check", "/c", version=3),),
    )
    text = render(plan, lambda dsn, statement: f"<{statement}>", statements=True)
    assert "hunter2" not in text
    assert "  <S1>;\n  <S2>;" in text
    assert "check /c (expecting version 3)" in text
    summary = render(plan, lambda dsn, statement: f"<{statement}>")
    assert "<S1>" not in summary, "the statements only with statements=True"
    assert "(one two-phase transaction): 2 statements" in summary


def _flat(statement: sql.Composable) -> str:
    """A statement as text without a server: identifiers quoted, literals as Python shows them."""
    if isinstance(statement, sql.Composed):
        return "".join(_flat(part) for part in statement)
    if isinstance(statement, sql.Identifier):
        return ".".join('"' + part.replace('"', '""') + '"' for part in statement.strings)
    if isinstance(statement, sql.Literal):
        return repr(statement.wrapped)
    assert isinstance(statement, sql.SQL)
    return statement.string


def test_a_plain_table_gets_statement_triggers_and_a_guard_that_never_fires() -> None:
    table = TableCapture("public", "orders", ("id",), ("id", "status"))
    texts = [_flat(statement) for statement in install_triggers("c", "s", "0123", table)]
    assert trigger_names("c", "s") == [
        "pgshovel_c_s",
        "pgshovel_c_s.insert",
        "pgshovel_c_s.update",
        "pgshovel_c_s.delete",
        "pgshovel_c_s_truncate",
    ]
    assert texts[:5] == [_flat(drop) for drop in drop_triggers("c", "s", "public", "orders")]
    arguments = "('pgshovel.c.s', '0123', '[\"id\"]', '{\"id\",\"status\"}')"
    assert texts[5:] == [
        'CREATE TRIGGER "pgshovel_c_s" AFTER DELETE ON "public"."orders" REFERENCING OLD TABLE '
        'AS "pgshovel_old" FOR EACH ROW WHEN (false) EXECUTE FUNCTION "pgshovel_c"."capture"'
        + arguments,
        'CREATE TRIGGER "pgshovel_c_s.insert" AFTER INSERT ON "public"."orders" REFERENCING '
        'NEW TABLE AS "pgshovel_new" FOR EACH STATEMENT EXECUTE FUNCTION "pgshovel_c"."capture"'
        + arguments,
        'CREATE TRIGGER "pgshovel_c_s.update" AFTER UPDATE ON "public"."orders" REFERENCING '
        'OLD TABLE AS "pgshovel_old" NEW TABLE AS "pgshovel_new" FOR EACH STATEMENT EXECUTE '
        'FUNCTION "pgshovel_c"."capture"' + arguments,
        'CREATE TRIGGER "pgshovel_c_s.delete" AFTER DELETE ON "public"."orders" REFERENCING '
        'OLD TABLE AS "pgshovel_old" FOR EACH STATEMENT EXECUTE FUNCTION "pgshovel_c"."capture"'
        + arguments,
        'CREATE TRIGGER "pgshovel_c_s_truncate" AFTER TRUNCATE ON "public"."orders" FOR EACH '
        'STATEMENT EXECUTE FUNCTION "pgshovel_c"."capture"' + arguments,
    ]


def test_a_table_that_needs_row_triggers_gets_them_with_its_column_list() -> None:
    table = TableCapture("public", "orders", ("id",), ("id", "status"), "it is in a tree")
    texts = [_flat(statement) for statement in install_triggers("c", "s", "0123", table)]
    created = [text for text in texts if text.startswith("CREATE TRIGGER")]
    assert len(created) == 2
    assert created[0].startswith(
        'CREATE TRIGGER "pgshovel_c_s" AFTER INSERT OR UPDATE OF "id", "status" OR DELETE ON '
        '"public"."orders" FOR EACH ROW EXECUTE FUNCTION'
    )
    assert "FOR EACH STATEMENT" not in created[0] and "AFTER TRUNCATE" in created[1]
    # Every name a set may have used is dropped first, whatever the table had.
    assert len([text for text in texts if text.startswith("DROP TRIGGER")]) == 5


def test_statement_trigger_names_stay_within_postgresql_identifiers() -> None:
    longest = trigger_names("c" * CLUSTER_NAME_MAX, "s" * SET_NAME_MAX)
    assert max(len(name.encode()) for name in longest) <= 63
    assert len(set(longest)) == len(longest)


def test_only_a_table_with_provenance_gets_the_fifth_argument() -> None:
    plain = TableCapture("s", "t", ("id",), ())
    stamped = TableCapture("s", "t", ("id",), (), provenance=True)
    assert len(trigger_arguments("c", "s", "0123", plain)) == 4
    assert trigger_arguments("c", "s", "0123", stamped) == [
        *trigger_arguments("c", "s", "0123", plain),
        "1",
    ]
    table = configuration_pb2.TableConfiguration(schema="public", name="orders", provenance=True)
    assert resolve_table(table, INFO, allow_unkeyed=False, database="x").provenance


def test_packing_is_the_sixth_argument_after_provenance_or_an_empty_fifth() -> None:
    plain = TableCapture("s", "t", ("id",), ())
    packed = TableCapture("s", "t", ("id",), (), packing="1000,16384")
    stamped = TableCapture("s", "t", ("id",), (), provenance=True, packing="7,100")
    base = trigger_arguments("c", "s", "0123", plain)
    assert trigger_arguments("c", "s", "0123", packed) == [*base, "", "1000,16384"]
    assert trigger_arguments("c", "s", "0123", stamped) == [*base, "1", "7,100"]


def test_the_packing_argument_of_a_set() -> None:
    configuration = configuration_pb2.ReplicationSetConfiguration()
    assert packing_argument(configuration) == f"{PACKING_ROWS},{PACKING_BYTES},copy"
    configuration.packing.rows, configuration.packing.bytes = 20, 4096
    assert packing_argument(configuration) == "20,4096,copy"
    # One change per row is no packing: the triggers are those of before.
    configuration.packing.rows = 1
    assert packing_argument(configuration) == ""
    table = configuration_pb2.TableConfiguration(schema="public", name="orders")
    resolved = resolve_table(table, INFO, allow_unkeyed=False, database="x", packing="20,4096")
    assert resolved.packing == "20,4096"
