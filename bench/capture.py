"""Capture overhead: pgbench TPS with pgshovel's triggers (and pgq.jsontriga) ÷ TPS without.

A scratch database is initialized with ``pgbench -i``; for two scripts (the
built-in TPC-B-like one and a single-row UPDATE) every round runs pgbench once
per mode: no capture, pgshovel's capture on all four pgbench tables
(pgbench_history has no key, so it is captured unkeyed), and PgQ's own C
trigger ``pgq.jsontriga`` as a reference; and pgshovel's capture with its two
schema event triggers disabled, which shows what they cost a DDL-free
workload (they fire on DDL only, so the ratio should be 1). Capture is installed with the same
SQL ``pgshovel-admin set create`` runs, without ZooKeeper, before each run and
removed after it, so every run starts from an empty queue.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import connection, make_dsn

from bench._modes import Settings
from bench._report import Figure, Goal
from bench._stats import schedule
from pgshovel.admin import catalog, install
from pgshovel.cluster import names
from pgshovel.source import Catalog

logger = logging.getLogger(__name__)

CLUSTER = "benchcapture"
SET = "pgbench"
DATABASE = "pgshovel_bench_capture"
TABLES = ("pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history")
JSONTRIGA_QUEUE = "bench_jsontriga"
GOAL = Goal("ratio", ">=", 0.85)
#: event triggers fire on DDL only: a DDL-free workload must not notice them
EVENT_TRIGGER_GOAL = Goal("ratio", ">=", 0.95)
_TPS = re.compile(r"^tps = ([0-9.]+)", re.MULTILINE)

UPDATE_SCRIPT = """\\set aid random(1, 100000 * :scale)
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
"""

#: script name -> its title in the table
SCRIPTS = {"tpcb": "TPC-B-like", "update": "single-row UPDATE"}


def _bindir() -> Path:
    return Path(os.environ.get("PGSHOVEL_POSTGRES_BINDIR", "/usr/lib/postgresql/15/bin"))


def _pgbench(dsn: str, *arguments: str) -> str:
    try:
        result = subprocess.run(
            [str(_bindir() / "pgbench"), *arguments, "--", dsn],
            capture_output=True,
            text=True,
            check=True,
        )
    except subprocess.CalledProcessError as error:
        raise RuntimeError(
            f"pgbench {' '.join(arguments)!r} failed ({error.returncode!r}): {error.stderr.strip()}"
        ) from error
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
        info = Catalog(conn).table("public", table)
        if info is None:
            raise RuntimeError(f"pgbench -i did not create {table!r}; is pgbench 15 installed?")
        capture = install.TableCapture("public", table, info.primary_key, ())
        statements += install.install_triggers(CLUSTER, SET, version, capture)
    _run(conn, statements)


def _remove_pgshovel(conn: connection) -> None:
    statements: list[sql.Composable] = []
    for table in TABLES:
        statements += install.drop_triggers(CLUSTER, SET, "public", table)
    statements.append(install.drop_queue(CLUSTER, SET))
    _run(conn, statements)


def _event_triggers(conn: connection, state: str) -> None:
    _run(
        conn,
        [
            sql.SQL("ALTER EVENT TRIGGER {} " + state).format(sql.Identifier(name))
            for name in (names.ddl_trigger_name(CLUSTER), names.drop_trigger_name(CLUSTER))
        ],
    )


def _install_pgshovel_without_ddl(conn: connection) -> None:
    _install_pgshovel(conn)
    _event_triggers(conn, "DISABLE")


def _remove_pgshovel_without_ddl(conn: connection) -> None:
    _event_triggers(conn, "ENABLE")
    _remove_pgshovel(conn)


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
    "pgshovel-no-ddl": (_install_pgshovel_without_ddl, _remove_pgshovel_without_ddl),
    "jsontriga": (_install_jsontriga, _remove_jsontriga),
}


def measure(
    server_dsn: str, settings: Settings, workdir: Path
) -> dict[str, dict[str, list[float]]]:
    """TPS per script, mode and round on a scratch database of ``server_dsn``'s server."""
    admin = psycopg2.connect(server_dsn)
    admin.autocommit = True
    scratch = str(make_dsn(server_dsn, dbname=DATABASE))
    script = workdir / "single-row-update.sql"
    script.write_text(UPDATE_SCRIPT)
    arguments = {"tpcb": ["-b", "tpcb-like"], "update": ["-f", str(script)]}
    clients = str(settings.pgbench_clients)
    threads = str(min(settings.pgbench_clients, os.cpu_count() or 1))
    results: dict[str, dict[str, list[float]]] = {
        name: {mode: [] for mode in MODES} for name in SCRIPTS
    }
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DATABASE))
    try:
        _run(admin, [drop, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE))])
        _pgbench(scratch, "-i", "-q", "-s", str(settings.pgbench_scale))
        conn = psycopg2.connect(scratch)
        conn.autocommit = True
        try:
            for name in SCRIPTS:
                for number, mode in schedule(settings.rounds, list(MODES)):
                    setup, teardown = MODES[mode]
                    setup(conn)
                    try:
                        output = _pgbench(
                            scratch,
                            *arguments[name],
                            "-n",
                            "-c",
                            clients,
                            "-j",
                            threads,
                            "-T",
                            str(settings.pgbench_seconds),
                        )
                    finally:
                        teardown(conn)
                    match = _TPS.search(output)
                    if match is None:
                        raise RuntimeError(f"pgbench printed no tps line: {output!r}")
                    results[name][mode].append(float(match.group(1)))
                    logger.info(
                        "capture %s round %d %s: %.1f tps",
                        name,
                        number + 1,
                        mode,
                        results[name][mode][-1],
                    )
        finally:
            conn.close()
    finally:
        _run(admin, [drop])
        admin.close()
    return results


#: per script: (key, title, mode measured, baseline mode, baseline title, goals)
COMPARISONS: tuple[tuple[str, str, str, str, str, tuple[Goal, ...]], ...] = (
    ("pgshovel", "capture overhead, {}, pgshovel", "pgshovel", "none", "no capture", (GOAL,)),
    (
        "jsontriga",
        "capture overhead, {}, pgq.jsontriga reference",
        "jsontriga",
        "none",
        "no capture",
        (),
    ),
    (
        "event_triggers",
        "schema event triggers on DML, {}, pgshovel",
        "pgshovel",
        "pgshovel-no-ddl",
        "pgshovel, event triggers disabled",
        (EVENT_TRIGGER_GOAL,),
    ),
)


def figures(results: dict[str, dict[str, list[float]]], settings: Settings) -> list[Figure]:
    """Per script: pgshovel ÷ no capture (with the goal), jsontriga ÷ no capture, and
    pgshovel ÷ pgshovel with its schema event triggers disabled."""
    made = []
    for name, title in SCRIPTS.items():
        runs = results.get(name, {})
        details = {"clients": settings.pgbench_clients, "seconds": settings.pgbench_seconds}
        for key, text, mode, baseline, baseline_title, goals in COMPARISONS:
            extra = {"scale": settings.pgbench_scale} if key == "pgshovel" else {}
            made.append(
                Figure(
                    key=f"capture.{name}.{key}",
                    title=f"{text.format(title)} (TPS)",
                    unit="tps",
                    values=runs.get(mode, []),
                    baseline=runs.get(baseline, []),
                    baseline_title=baseline_title,
                    goals=goals,
                    details={**details, **extra},
                )
            )
    return made
