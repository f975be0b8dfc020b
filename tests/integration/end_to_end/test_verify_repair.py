"""``set verify --repair`` repairs every table that differs, and rows changed with triggers off.

Six small tables stream into a PostgreSQL copy. Rows of 2, then 3, then all 6
tables are changed, deleted and added directly in the copy; one ``set verify
--repair`` of the whole set reports "done" (exit 0) only with every one of them
repaired: the copy equals the source row for row the moment the command
returns. Then rows changed in the source with its triggers off
(``session_replication_role = replica``: capture cannot see them) are found by
``set verify`` (exit 1) and restored by ``set verify --repair``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from pgshovel.sandbox import SandboxConnection

from ._requests import SET, make_stack, run_sql

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]

TABLES = [f"r{number}" for number in range(1, 7)]
SCHEMA = [
    statement
    for table in TABLES
    for statement in (
        f"CREATE TABLE {table} (id integer PRIMARY KEY, v text NOT NULL)",
        f"INSERT INTO {table} SELECT g, 'v' || g FROM generate_series(1, 60) g",
    )
]


def tamper(target: str, tables: list[str]) -> None:
    run_sql(
        target,
        *(
            statement
            for table in tables
            for statement in (
                f"UPDATE {table} SET v = 'tampered' WHERE id = 5",
                f"DELETE FROM {table} WHERE id = 40",
                f"INSERT INTO {table} VALUES (1000, 'only in the copy')",
            )
        ),
    )


def test_verify_repair_repairs_every_table_and_rows_changed_with_triggers_off(
    sandbox: SandboxConnection,
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: list[Any],
) -> None:
    stack = make_stack(sandbox, make_database, cluster_name, tmp_path, processes, kafka_config)
    stack.start(zookeeper, SCHEMA, [{"name": table} for table in TABLES])
    stack.caught_up()
    stack.assert_equal(*TABLES)

    for tampered in (TABLES[:2], TABLES[1:4], TABLES):
        tamper(stack.target, tampered)
        code, output = stack.admin("verify", SET, "--repair")
        assert code == 0, output
        assert "status: done" in output, output
        repaired = set(re.findall(r"public\.(r\d): repair of", output))
        assert repaired == set(tampered), output
        # "done" means done: every table is repaired when the command returns.
        stack.assert_equal(*TABLES)

    # Triggers off in the source: the stream never hears of these rows.
    run_sql(
        stack.source,
        "UPDATE r3 SET v = 'unseen' WHERE id BETWEEN 10 AND 12",
        "DELETE FROM r3 WHERE id = 50",
        "INSERT INTO r3 VALUES (2000, 'unseen')",
        replica=True,
    )
    run_sql(stack.source, "UPDATE r3 SET v = 'seen' WHERE id = 1")  # captured as usual
    stack.caught_up()
    source, copy = stack.rows("r3")
    assert copy != source
    code, output = stack.admin("verify", SET, "r3")
    assert code == 1, output
    differing = r"range \d+ \[.*\): \d+ bucket\(s\) differ, holding \d+ row\(s\) in the source"
    assert re.search(differing + r" and \d+ row\(s\) in the copy", output), output
    code, output = stack.admin("verify", SET, "r3", "--repair")
    assert code == 0, output
    stack.assert_equal(*TABLES)
    assert stack.worker.alive()
