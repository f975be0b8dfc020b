"""`pgshovel-admin set tail` prints exactly the committed mutations as JSON lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg2
import pytest

from pgshovel.sandbox import SandboxConnection
from tests.integration.capture._capture import SET
from tests.integration.relay._relay import RelayProcess, queue_drained, wait_for, write_relay_yml
from tests.integration.relay.test_relay import prepare

pytestmark = [pytest.mark.integration]

ADMIN = Path(sys.executable).with_name("pgshovel-admin")


def test_tail_prints_committed_mutations(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    tmp_path: Path,
) -> None:
    prepare(database, zookeeper, cluster_name)
    relay = RelayProcess(
        sandbox, cluster_name, write_relay_yml(tmp_path, sandbox), tmp_path / "relay.log"
    )
    try:
        connection = psycopg2.connect(database)
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO items VALUES (1, 10, 'it''s \"quoted\"'), (2, 20, NULL)")
            connection.commit()
            cursor.execute("INSERT INTO items VALUES (3, 30, 'never')")
            connection.rollback()
            cursor.execute("UPDATE items SET id = 5, value = 11 WHERE id = 1")
            cursor.execute("DELETE FROM items WHERE id = 2")
            connection.commit()
        connection.close()
        wait_for(lambda: queue_drained(database, cluster_name), 60, "the relay to drain")
    finally:
        assert relay.stop() == 0, relay.output()
    environment = {**os.environ, **sandbox.environment(), "PGSHOVEL_CLUSTER": cluster_name}
    result = subprocess.run(
        [str(ADMIN), "set", "tail", SET],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    announcement, *lines = lines
    assert (announcement["operation"], announcement["kind"]) == ("SCHEMA", "ANNOUNCE")
    assert announcement["columns"][0] == {"name": "id", "type": "integer", "not_null": True}
    assert announcement["key"] == ["id"]
    assert [(line["operation"], line["table"]) for line in lines] == [
        ("INSERT", "items"),
        ("INSERT", "items"),
        ("UPDATE", "items"),
        ("DELETE", "items"),
    ]
    assert lines[0]["new"] == {"id": "1", "value": "10", "note": 'it\'s "quoted"'}
    assert lines[1]["new"]["note"] is None
    assert lines[2]["old"]["id"] == "1" and lines[2]["new"]["id"] == "5"
    assert lines[3]["old"]["id"] == "2" and lines[3]["new"] is None
    assert lines[0]["transaction"] == lines[1]["transaction"] != lines[2]["transaction"]
    assert all(line["key_columns"] == ["id"] for line in lines)
    assert "never" not in result.stdout
