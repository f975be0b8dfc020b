"""Turning provenance on and off is a set update: new version, triggers installed again."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg2
import pytest
import yaml

from pgshovel.cluster.sets import PACKING_BYTES, PACKING_ROWS
from pgshovel.inspection import catalog
from pgshovel.relay.packing import unpacked
from pgshovel.sandbox import SandboxConnection
from tests.integration.admin._admin import admin, execute, ok

pytestmark = pytest.mark.integration


def _arguments(dsn: str) -> dict[str, tuple[str, ...]]:
    conn = psycopg2.connect(dsn)
    try:
        return {
            name: trigger.arguments
            for name, trigger in catalog.installed_triggers(conn, "public", "orders").items()
        }
    finally:
        conn.close()


def _last_event(dsn: str) -> list[object]:
    """The data of the queue's last INSERT, packed rows expanded as the relay expands them."""
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cursor:
            cursor.execute(
                "SELECT ev_id, 0, ev_txid, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3,"
                " ev_extra4 FROM pgq.event_template ORDER BY ev_id"
            )
            rows = cursor.fetchall()
    finally:
        conn.close()
    inserts = [event[4] for chunk in unpacked([rows]) for event in chunk if event[3] == "I"]
    assert inserts
    data = inserts[-1]
    return list(data if isinstance(data, list) else json.loads(data))


def test_set_update_turns_provenance_on_and_off(
    sandbox: SandboxConnection, database: str, cluster_name: str, tmp_path: Path
) -> None:
    execute(database, "CREATE TABLE orders (id int PRIMARY KEY, v text)")
    document: dict[str, object] = {"database": {"dsn": database}, "tables": [{"name": "orders"}]}
    path = tmp_path / "set.yml"
    path.write_text(yaml.safe_dump(document))
    ok(admin(sandbox, cluster_name, "cluster", "initialize"))
    ok(admin(sandbox, cluster_name, "set", "create", "app", path))
    before = _arguments(database)
    # No provenance (an empty fifth argument), packing by default (the sixth).
    packing = f"{PACKING_ROWS},{PACKING_BYTES},copy"
    assert before and all(arguments[4:] == ("", packing) for arguments in before.values())

    path.write_text(yaml.safe_dump({**document, "provenance": True}))
    plan = ok(admin(sandbox, cluster_name, "set", "update", "app", path, "--dry-run", "--sql"))
    assert "'1'" in plan  # the fifth trigger argument
    assert "  changed  public.orders: provenance off -> on; statement triggers reinstalled" in (
        plan.splitlines()
    )
    ok(admin(sandbox, cluster_name, "set", "update", "app", path))
    after = _arguments(database)
    assert after.keys() == before.keys()
    assert all(arguments[4:] == ("1", packing) for arguments in after.values())
    assert {arguments[1] for arguments in after.values()} != {a[1] for a in before.values()}
    assert "provenance: true" in ok(admin(sandbox, cluster_name, "set", "inspect", "app"))
    execute(database, "INSERT INTO orders VALUES (1, 'a')")
    event = _last_event(database)
    assert len(event) == 3 and isinstance(event[2], dict) and "s" in event[2]

    # A table may say otherwise than its set.
    path.write_text(
        yaml.safe_dump(
            {**document, "provenance": True, "tables": [{"name": "orders", "provenance": False}]}
        )
    )
    ok(admin(sandbox, cluster_name, "set", "update", "app", path))
    assert all(arguments[4:] == ("", packing) for arguments in _arguments(database).values())
    execute(database, "INSERT INTO orders VALUES (2, 'b')")
    assert len(_last_event(database)) == 2

    # Packing off (a row per change): the triggers of before packing existed.
    path.write_text(yaml.safe_dump({**document, "packing": {"rows": 1}}))
    ok(admin(sandbox, cluster_name, "set", "update", "app", path))
    assert all(len(arguments) == 4 for arguments in _arguments(database).values())
