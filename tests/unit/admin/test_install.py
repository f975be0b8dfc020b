"""Checking configured tables against the catalog, and the trigger arguments."""

from __future__ import annotations

import json

import pytest

from pgshovel.admin.catalog import TableInfo
from pgshovel.admin.install import (
    TableCapture,
    resolve_table,
    text_array_literal,
    trigger_arguments,
)
from pgshovel.admin.plan import DatabaseStep, Plan, ZooKeeperOperation, render
from pgshovel.errors import ConfigurationError
from pgshovel.protocol import configuration_pb2

INFO = TableInfo("public", "orders", ("id", "status", "note"), ("id",))


def _table(**fields: object) -> configuration_pb2.TableConfiguration:
    return configuration_pb2.TableConfiguration(schema="public", name="orders", **fields)  # type: ignore[arg-type]


def test_the_primary_key_is_the_default_key() -> None:
    resolved = resolve_table(_table(), INFO, allow_unkeyed=False, database="dbname=app")
    assert resolved == TableCapture("public", "orders", ("id",), ())


def test_a_missing_table_is_named_with_its_database() -> None:
    with pytest.raises(ConfigurationError, match=r"'public'\.'orders' does not exist in database"):
        resolve_table(_table(), None, allow_unkeyed=False, database="dbname=app")


def test_unknown_columns_are_named() -> None:
    with pytest.raises(ConfigurationError, match="no column 'price'"):
        resolve_table(_table(columns=["id", "price"]), INFO, allow_unkeyed=False, database="x")
    with pytest.raises(ConfigurationError, match="no key column 'code'"):
        resolve_table(_table(key_columns=["code"]), INFO, allow_unkeyed=False, database="x")


def test_unkeyed_tables_are_refused_unless_allowed() -> None:
    unkeyed = TableInfo("public", "orders", ("id",), ())
    with pytest.raises(ConfigurationError, match=r"'orders' has no primary key.*allow_unkeyed"):
        resolve_table(_table(), unkeyed, allow_unkeyed=False, database="x")
    resolved = resolve_table(_table(), unkeyed, allow_unkeyed=True, database="x")
    assert resolved.key_columns == ()


def test_captured_columns_must_include_the_primary_key() -> None:
    with pytest.raises(ConfigurationError, match="include the key column 'id'"):
        resolve_table(_table(columns=["status"]), INFO, allow_unkeyed=False, database="x")


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
