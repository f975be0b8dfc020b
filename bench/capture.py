"""Capture overhead: pgbench TPS with each capture and its consumer ÷ TPS without, same run.

A scratch database is initialized with ``pgbench -i``; for two scripts (the
built-in TPC-B-like one and a single-row UPDATE) every round runs pgbench once
per capture of :mod:`bench._captures` (no capture; pgshovel's C trigger as set
create installs it, packing; the same with packing off, a queue row per change;
the same with row triggers, as before statement triggers; its PL/pgSQL fallback;
pgshovel's with its schema event triggers disabled, whose ratio to pgshovel
should be 1 as they fire on DDL only; pgshovel's triggers calling a function that
does nothing, the bound of any capture through them; PgQ's C trigger ``pgq.jsontriga``; the
floor, one constant event per row from a PL/pgSQL trigger; a wal2json slot read
by ``pg_recvlogical``), each with its consumer draining concurrently. pgshovel is
also reported against the floor (within 0.05 of the floor's ratio is as cheap as
trigger capture gets) and against the logical decoding peer (at least its ratio).
The same comparisons (without the event-trigger one) run again with ``fsync``
and ``synchronous_commit`` on (:mod:`bench._durable`), for ``durable_seconds``
each: 1 s in quick mode as every other run, which still exercises the switch. Then one ``UPDATE`` of
100,000 accounts is timed once per capture and round (after a VACUUM), with the
fast settings and again with durable commits; its figure is rows/s with capture
÷ rows/s without. pgshovel with provenance (``pgshovel-provenance``) runs in the
fast and bulk parts, also compared with pgshovel without it (goal 0.95). Quick
mode runs some captures in some parts only (``QUICK_PARTS`` in
:mod:`bench._capture_figures`, which holds the plan and the figures): every
capture once, durable commits with pgshovel and no capture only, 75 runs of
about a second instead of 156. A part
that fails (a durable switch, a bulk statement, or the logical peer when
wal2json is missing) is reported as not measured and the others still are.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import connection, make_dsn

from bench._capture_figures import (
    BULK_CAPTURES,
    BULK_PARTS,
    BULK_ROWS,
    SCRIPTS,
    TPS_CAPTURES,
    CaptureRuns,
    figures,
    runs_in,
    tps_part,
)
from bench._captures import CAPTURES, PLUGIN, SLOT
from bench._drain import allow_output_plugin, drop_slot
from bench._durable import durable
from bench._modes import Settings
from bench._stats import schedule

__all__ = ["BULK_CAPTURES", "SCRIPTS", "TPS_CAPTURES", "CaptureRuns", "figures", "measure"]

logger = logging.getLogger(__name__)

DATABASE = "pgshovel_bench_capture"
PROBE_SLOT = f"{SLOT}_probe"
_TPS = re.compile(r"^tps = ([0-9.]+)", re.MULTILINE)

UPDATE_SCRIPT = """\\set aid random(1, 100000 * :scale)
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
"""
BULK_UPDATE = sql.SQL("UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid <= {}").format(
    sql.Literal(BULK_ROWS)
)


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


def _run(conn: connection, statements: Sequence[sql.Composable]) -> None:
    with conn.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def _logical_unavailable(conn: connection) -> str:
    """Why a wal2json slot cannot be made here ("" when it can): a probe slot, dropped at once."""
    probe = PROBE_SLOT
    try:
        allow_output_plugin(conn, DATABASE, PLUGIN)
        _run(
            conn,
            [
                sql.SQL("SELECT pg_create_logical_replication_slot({}, {})").format(
                    sql.Literal(probe), sql.Literal(PLUGIN)
                )
            ],
        )
    except psycopg2.Error as error:
        return (
            f"cannot create a {PLUGIN} replication slot ({str(error).strip()}); make setup "
            "installs postgresql-15-wal2json, the sandbox sets wal_level=logical"
        )
    drop_slot(conn, probe)
    return ""


class _Measurement:
    """The parts of the capture group, run on one scratch database; they fill ``runs``."""

    def __init__(
        self, conn: connection, server_dsn: str, settings: Settings, workdir: Path
    ) -> None:
        self.conn = conn
        self.server_dsn = server_dsn
        self.dsn = str(make_dsn(server_dsn, dbname=DATABASE))
        self.settings = settings
        self.workdir = workdir
        self.runs = CaptureRuns()
        script = workdir / "single-row-update.sql"
        script.write_text(UPDATE_SCRIPT)
        self.arguments = {"tpcb": ["-b", "tpcb-like"], "update": ["-f", str(script)]}

    def available(self, captures: Sequence[str]) -> list[str]:
        """``captures`` without those that cannot run here (see ``runs.failures``)."""
        return [mode for mode in captures if mode not in self.runs.failures]

    def fast_runs(self) -> None:
        self.runs.tps["fast"] = self._tps(
            "fast", TPS_CAPTURES["fast"], self.settings.pgbench_seconds
        )

    def durable_runs(self) -> None:
        with durable(self.server_dsn):
            self.runs.tps["durable"] = self._tps(
                "durable", TPS_CAPTURES["durable"], self.settings.durable_seconds
            )

    def _tps(
        self, label: str, captures: Sequence[str], seconds: int
    ) -> dict[str, dict[str, list[float]]]:
        """TPS per script and capture, the captures alternating each round."""
        clients = str(self.settings.pgbench_clients)
        threads = str(min(self.settings.pgbench_clients, os.cpu_count() or 1))
        available = self.available(captures)
        results: dict[str, dict[str, list[float]]] = {}
        for name in SCRIPTS:
            part = tps_part(label, name)
            modes = [mode for mode in available if runs_in(self.settings, mode, part)]
            results[name] = {mode: [] for mode in modes}
            for number, mode in schedule(self.settings.rounds, modes):
                with CAPTURES[mode](self.conn, self.dsn, self.workdir):
                    output = _pgbench(
                        self.dsn,
                        *self.arguments[name],
                        *("-n", "-c", clients, "-j", threads, "-T", str(seconds)),
                    )
                match = _TPS.search(output)
                if match is None:
                    raise RuntimeError(f"pgbench printed no tps line: {output!r}")
                results[name][mode].append(float(match.group(1)))
                logger.info(
                    "capture %s %s round %d %s: %.1f tps",
                    label,
                    name,
                    number + 1,
                    mode,
                    results[name][mode][-1],
                )
        return results

    def bulk_runs(self) -> None:
        self.runs.bulk["fast"] = self._bulk("fast")

    def durable_bulk_runs(self) -> None:
        with durable(self.server_dsn):
            self.runs.bulk["durable"] = self._bulk("durable")

    def _bulk(self, label: str) -> dict[str, list[float]]:
        """Rows/s of one UPDATE of BULK_ROWS accounts per capture, alternating each round."""
        part = BULK_PARTS[label]
        modes = [
            mode
            for mode in self.available(BULK_CAPTURES[label])
            if runs_in(self.settings, mode, part)
        ]
        results: dict[str, list[float]] = {mode: [] for mode in modes}
        for number, mode in schedule(self.settings.rounds, modes):
            # Each run leaves 100,000 dead rows: the next one must not pay for them.
            _run(self.conn, [sql.SQL("VACUUM pgbench_accounts")])
            with CAPTURES[mode](self.conn, self.dsn, self.workdir):
                with self.conn.cursor() as cursor:
                    started = time.perf_counter()
                    cursor.execute(BULK_UPDATE)
                    seconds = time.perf_counter() - started
                    changed = cursor.rowcount
            if changed != BULK_ROWS:
                raise RuntimeError(
                    f"the bulk UPDATE changed {changed!r} rows, expected {BULK_ROWS!r}"
                )
            results[mode].append(BULK_ROWS / seconds)
            logger.info("capture %s round %d %s: %.3fs", part, number + 1, mode, seconds)
        return results


def measure(server_dsn: str, settings: Settings, workdir: Path) -> CaptureRuns:
    """Every part's runs on a scratch database of ``server_dsn``'s server."""
    admin = psycopg2.connect(server_dsn)
    admin.autocommit = True
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DATABASE))
    try:
        # A slot left by an interrupted run would keep its database from being dropped.
        for slot in (SLOT, PROBE_SLOT):
            drop_slot(admin, slot)
        _run(admin, [drop, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE))])
        conn = psycopg2.connect(make_dsn(server_dsn, dbname=DATABASE))
        conn.autocommit = True
        try:
            bench = _Measurement(conn, server_dsn, settings, workdir)
            _pgbench(bench.dsn, "-i", "-q", "-s", str(settings.pgbench_scale))
            why = _logical_unavailable(conn)
            if why:
                logger.warning("no logical decoding peer: %s", why)
                bench.runs.failures["logical"] = why
            for part, run in (
                ("fast", bench.fast_runs),
                ("bulk", bench.bulk_runs),
                ("durable", bench.durable_runs),
                ("bulk-durable", bench.durable_bulk_runs),
            ):
                try:
                    run()
                except Exception as error:
                    logger.exception("capture %s runs failed; reported as not measured", part)
                    bench.runs.failures[part] = f"{type(error).__name__}: {error}"[:300]
        finally:
            conn.close()
    finally:
        try:
            for slot in (SLOT, PROBE_SLOT):
                drop_slot(admin, slot)
            _run(admin, [drop])
        finally:
            admin.close()
    return bench.runs
