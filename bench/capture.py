"""Capture overhead: pgbench (TPC-B-like) TPS without triggers, with pgshovel, with pgq.jsontriga.

Usage: ``python -m bench.capture --dsn "host=127.0.0.1 port=5432 user=postgres"``.
A scratch database is created (and dropped at the end), initialized with
``pgbench -i``; then each round runs pgbench once per mode, alternating modes
so drift on the machine hits them alike. pgshovel's capture is installed with
the same SQL ``pgshovel-admin set create`` runs (all four pgbench tables;
pgbench_history has no key, so it is captured unkeyed), without ZooKeeper;
each mode starts from an empty queue. The result is printed as one line per
run and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
from collections.abc import Callable
from pathlib import Path

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import connection, make_dsn, parse_dsn

from pgshovel.admin import catalog, install

CLUSTER = "bench"
SET = "pgbench"
DATABASE = "pgshovel_bench_capture"
TABLES = ("pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history")
JSONTRIGA_QUEUE = "bench_jsontriga"
_TPS = re.compile(r"^tps = ([0-9.]+)", re.MULTILINE)


def _bindir() -> Path:
    return Path(os.environ.get("PGSHOVEL_POSTGRES_BINDIR", "/usr/lib/postgresql/15/bin"))


def _pgbench(dsn: str, *arguments: str) -> str:
    result = subprocess.run(
        [str(_bindir() / "pgbench"), *arguments, "--", dsn],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def _run(conn: connection, statements: list[sql.Composable]) -> None:
    with conn.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def _install_pgshovel(conn: connection) -> None:
    statements = [
        *install.base_statements(CLUSTER, catalog.extension_schema(conn, "hstore")),
        install.create_queue(CLUSTER, SET),
    ]
    version = "0123456789abcdef"
    for table in TABLES:
        info = catalog.table_info(conn, "public", table)
        if info is None:
            raise RuntimeError(f"pgbench -i did not create {table!r}")
        capture = install.TableCapture("public", table, info.primary_key, ())
        statements += install.install_triggers(CLUSTER, SET, version, capture)
    _run(conn, statements)


def _remove_pgshovel(conn: connection) -> None:
    statements: list[sql.Composable] = []
    for table in TABLES:
        statements += install.drop_triggers(CLUSTER, SET, "public", table)
    statements.append(install.drop_queue(CLUSTER, SET))
    _run(conn, statements)


def _install_jsontriga(conn: connection) -> None:
    statements: list[sql.Composable] = [
        sql.SQL("CREATE EXTENSION IF NOT EXISTS pgq"),
        sql.SQL("SELECT pgq.create_queue({})").format(sql.Literal(JSONTRIGA_QUEUE)),
    ]
    statements += [
        sql.SQL(
            "CREATE TRIGGER bench_jsontriga AFTER INSERT OR UPDATE OR DELETE ON {} "
            "FOR EACH ROW EXECUTE FUNCTION pgq.jsontriga({})"
        ).format(sql.Identifier("public", table), sql.Literal(JSONTRIGA_QUEUE))
        for table in TABLES
    ]
    _run(conn, statements)


def _remove_jsontriga(conn: connection) -> None:
    statements: list[sql.Composable] = [
        sql.SQL("DROP TRIGGER IF EXISTS bench_jsontriga ON {}").format(
            sql.Identifier("public", table)
        )
        for table in TABLES
    ]
    statements.append(
        sql.SQL("SELECT pgq.drop_queue({}, true)").format(sql.Literal(JSONTRIGA_QUEUE))
    )
    _run(conn, statements)


def _nothing(conn: connection) -> None:
    """No capture."""


MODES: dict[str, tuple[Callable[[connection], None], Callable[[connection], None]]] = {
    "none": (_nothing, _nothing),
    "pgshovel": (_install_pgshovel, _remove_pgshovel),
    "jsontriga": (_install_jsontriga, _remove_jsontriga),
}


def measure(
    server_dsn: str, *, scale: int, clients: int, seconds: int, rounds: int
) -> dict[str, list[float]]:
    """TPS per mode and round, on a scratch database of ``server_dsn``'s server."""
    admin = psycopg2.connect(server_dsn)
    admin.autocommit = True
    scratch = make_dsn(server_dsn, dbname=DATABASE)
    results: dict[str, list[float]] = {mode: [] for mode in MODES}
    try:
        _run(admin, [sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(DATABASE))])
        _run(admin, [sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE))])
        _pgbench(scratch, "-i", "-q", "-s", str(scale))
        conn = psycopg2.connect(scratch)
        conn.autocommit = True
        try:
            for _round in range(rounds):
                for mode, (setup, teardown) in MODES.items():
                    setup(conn)
                    output = _pgbench(
                        scratch, "-n", "-c", str(clients), "-j", str(clients), "-T", str(seconds)
                    )
                    teardown(conn)
                    match = _TPS.search(output)
                    if match is None:
                        raise RuntimeError(f"pgbench printed no tps: {output!r}")
                    results[mode].append(float(match.group(1)))
                    print(f"round {_round + 1} {mode:9} {results[mode][-1]:10.1f} tps", flush=True)
        finally:
            conn.close()
    finally:
        _run(admin, [sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(DATABASE))])
        admin.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", required=True, help="a superuser DSN of the server to measure")
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    options = parser.parse_args()
    if "dbname" not in parse_dsn(options.dsn):
        options.dsn = make_dsn(options.dsn, dbname="postgres")
    results = measure(
        options.dsn,
        scale=options.scale,
        clients=options.clients,
        seconds=options.seconds,
        rounds=options.rounds,
    )
    baseline = statistics.median(results["none"])
    for mode, values in results.items():
        median = statistics.median(values)
        print(f"{mode:9} median {median:10.1f} tps  ratio {median / baseline:.3f}")


if __name__ == "__main__":
    main()
