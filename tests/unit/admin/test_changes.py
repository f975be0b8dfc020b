"""The summary a dry run prints first: each table added, changed, unchanged or removed, with
its triggers, and the plan's grants and statement counts before any SQL."""

from __future__ import annotations

from psycopg2 import sql

from pgshovel.admin import changes
from pgshovel.admin.install import TableCapture
from pgshovel.admin.plan import DatabaseStep, Plan, ZooKeeperOperation, render
from pgshovel.protocol import configuration_pb2

Table = configuration_pb2.TableConfiguration


def _captured(table: Table, key: tuple[str, ...], row_triggers: str = "") -> TableCapture:
    return TableCapture(
        table.schema, table.name, key, tuple(table.columns), row_triggers, table.provenance
    )


def test_an_update_names_each_table_with_what_changed_and_its_triggers() -> None:
    before = [
        Table(schema="public", name="orders"),
        Table(schema="public", name="lines", key_columns=["order_id", "line"]),
        Table(schema="public", name="log"),
        Table(schema="sales", name="gone"),
        Table(schema="public", name="notes"),
    ]
    after = [
        Table(schema="public", name="orders", columns=["id", "status"], provenance=True),
        Table(schema="public", name="lines"),
        Table(schema="public", name="notes"),
        Table(schema="public", name="items"),
    ]
    captured = [
        _captured(after[0], ("id",)),
        _captured(after[1], ("order_id", "line")),
        _captured(after[2], ("id",), row_triggers="it is in an inheritance tree"),
        _captured(after[3], ("sku",)),
    ]
    found = changes.set_update("app", before, captured, after, gone=[("sales", "gone")])
    assert changes.summary(found) == [
        "set 'app': 6 table(s): 1 added, 2 changed, 1 unchanged, 2 removed",
        "  changed    public.orders: every column -> columns (id, status); provenance off -> on; "
        "statement triggers reinstalled",
        "  changed    public.lines: key (order_id, line) -> primary key (order_id, line); "
        "statement triggers reinstalled",
        "  unchanged  public.notes: row triggers reinstalled (it is in an inheritance tree)",
        "  added      public.items: primary key (sku), every column; statement triggers installed",
        "  removed    public.log: triggers dropped",
        "  removed    sales.gone: no longer exists: nothing to drop",
    ]


def test_a_new_table_says_how_it_is_captured() -> None:
    unkeyed = Table(schema="public", name="log", provenance=True)
    keyed = Table(schema="s", name="t", key_columns=["a"], columns=["a", "b"])
    assert changes.added("x", _captured(unkeyed, ()), unkeyed).describe() == (
        "public.log: no key, every column, with provenance; statement triggers installed"
    )
    assert changes.added("x", _captured(keyed, ("a",), "why"), keyed).describe() == (
        "s.t: key (a), columns (a, b); row triggers installed (why)"
    )


def test_a_table_whose_triggers_are_kept_points_at_the_note() -> None:
    kept = changes.kept("app", Table(schema="public", name="t"))
    assert changes.summary([kept]) == [
        "set 'app': 1 table(s): 1 kept",
        "  kept  public.t: triggers left as they are (see the note)",
    ]


def test_grants_say_what_the_install_revokes_and_what_is_left_to_grant() -> None:
    created = changes.grant_lines("c", "app", created=True, added=2)
    assert created[0] == (
        "EXECUTE on the 5 SECURITY DEFINER functions of schema 'pgshovel_c' revoked from "
        "PUBLIC (as on every install)"
    )
    assert "'pgshovel-admin set grants app --relay-role ROLE --worker-role ROLE'" in created[1]
    added = changes.grant_lines("c", "app", added=1)
    assert "SELECT on the 1 added table(s)" in added[1]
    assert "--worker-role ROLE" in added[1]
    assert len(changes.grant_lines("c", "app")) == 1, "nothing left to grant: no table added"


def test_the_summary_comes_first_and_the_statements_only_when_asked() -> None:
    table = Table(schema="public", name="orders")
    plan = Plan(
        summary="create set 'app' in cluster 'c' at version v1",
        cluster="c",
        databases=(
            DatabaseStep(
                "dbname=app password=hunter2",
                (sql.SQL("SELECT 1"), sql.SQL("SELECT 2"), sql.SQL("SELECT 3")),
                "c",
            ),
        ),
        zookeeper=(ZooKeeperOperation("create", "/c/sets/app", description="set"),),
        notes=("something to know",),
        tables=(changes.added("app", _captured(table, ("id",)), table),),
        grants=("EXECUTE revoked",),
    )
    summary = render(plan, lambda dsn, statement: "SQL")
    assert summary.splitlines() == [
        "plan: create set 'app' in cluster 'c' at version v1",
        "set 'app': 1 table(s): 1 added",
        "  added  public.orders: primary key (id), every column; statement triggers installed",
        "grants: EXECUTE revoked",
        "database 'password=******** dbname=app' (one two-phase transaction; capture function "
        "LANGUAGE c): 3 statements",
        "zookeeper (one multi-op):",
        "  create /c/sets/app: set",
        "note: something to know",
    ]
    full = render(plan, lambda dsn, statement: "SQL", statements=True).splitlines()
    assert full[4].endswith("3 statements:") and full[5:8] == ["  SQL;"] * 3
    assert [line for line in full if not line.startswith("  SQL")] == [
        *summary.splitlines()[:4],
        summary.splitlines()[4] + ":",
        *summary.splitlines()[5:],
    ]
