"""Checking configured tables against the catalog, and the trigger arguments."""

from __future__ import annotations

import json

from pgshovel.admin.install import (
    TableCapture,
    resolve_table,
    text_array_literal,
    trigger_arguments,
)
from pgshovel.admin.plan import DatabaseStep, Plan, ZooKeeperOperation, render
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
    text = render(plan, lambda dsn, statement: f"<{statement}>")
    assert "hunter2" not in text
    assert "  <S1>;\n  <S2>;" in text
    assert "check /c (expecting version 3)" in text
