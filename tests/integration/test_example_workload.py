"""``python -m example.workload`` can be run again and again on the same database.

The second run (with another client count) finds the schema and the seed data
in place, skips them, and creates orders and customers above the first run's
ids instead of failing on a duplicate key.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg2
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def run_workload(dsn: str, clients: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "example.workload",
            "--dsn",
            dsn,
            "--schema",
            "--seconds",
            "2",
            "--clients",
            str(clients),
            "--rate",
            "100",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def counts(dsn: str) -> tuple[int, int, int]:
    connection = psycopg2.connect(dsn)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT (SELECT count(*) FROM orders), (SELECT max(id) FROM orders),"
                " (SELECT count(*) FROM customers)"
            )
            row = cursor.fetchone()
    finally:
        connection.close()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def test_the_workload_runs_twice_on_the_same_database(database: str) -> None:
    first = run_workload(database, clients=2)
    assert first.returncode == 0, first.stderr
    assert "transactions committed" in first.stdout
    _orders, first_max_id, _customers = counts(database)

    second = run_workload(database, clients=3)
    assert second.returncode == 0, second.stderr
    assert "tables exist already" in second.stderr
    assert "holds data already" in second.stderr
    committed = int(second.stdout.split(" transactions committed")[0].split()[-1])
    assert committed > 0
    _orders, second_max_id, _customers = counts(database)
    # New orders (or renumbered ones) landed above the first run's ids.
    assert second_max_id > first_max_id
