"""Capture overhead: pgbench TPS with each capture and its consumer ÷ TPS without, same run.

A scratch database is initialized with ``pgbench -i``; for two scripts (the
built-in TPC-B-like one and a single-row UPDATE) every round runs pgbench once
per capture of :mod:`bench._captures` (no capture; pgshovel's C trigger; the
same with row triggers, as before statement triggers; its PL/pgSQL fallback;
pgshovel's with
its schema event triggers disabled, whose ratio to pgshovel should be 1 as they
fire on DDL only; PgQ's C trigger ``pgq.jsontriga``; the floor, one constant
event per row from a PL/pgSQL trigger; a wal2json slot read by
``pg_recvlogical``), each with its consumer draining concurrently. pgshovel is
also reported against the floor: within 0.05 of the floor's ratio is as cheap
as trigger capture gets. The same comparisons (without the event-trigger one)
run again with ``fsync`` and ``synchronous_commit`` on (:mod:`bench._durable`),
for ``durable_seconds`` each: 1 s in quick mode as every other run, which
keeps the quick suite near two and a half minutes and still exercises the
switch. Last, one ``UPDATE`` of 100,000 accounts is timed once per capture
and round (after a VACUUM, with the sandbox's fast settings only); its figure
is rows/s with capture ÷ rows/s without. pgshovel with provenance
(``pgshovel-provenance``) runs in the fast and bulk parts, also compared with
pgshovel without it (goal 0.95); quick mode runs it for TPC-B-like and the bulk statement. A
part that fails (the durable switch, the bulk statement, or the logical peer
when wal2json is missing) is reported as not measured and the others still are.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import connection, make_dsn

from bench._captures import CAPTURES, PLUGIN, SLOT
from bench._drain import allow_output_plugin, drop_slot
from bench._durable import durable
from bench._modes import Settings
from bench._report import Figure, Goal
from bench._stats import schedule

logger = logging.getLogger(__name__)

DATABASE = "pgshovel_bench_capture"
GOAL = Goal("ratio", ">=", 0.85)
#: event triggers fire on DDL only: a DDL-free workload must not notice them
EVENT_TRIGGER_GOAL = Goal("ratio", ">=", 0.95)
#: provenance on costs at most 5% of capture without it
PROVENANCE_GOAL = Goal("ratio", ">=", 0.95)
#: pgshovel's ratio to no capture within 0.05 of the floor's
FLOOR_GOAL = Goal("gap", ">=", -0.05)
BULK_GOAL = Goal("ratio", ">=", 0.5)
BULK_ROWS = 100_000
PROBE_SLOT = f"{SLOT}_probe"
_TPS = re.compile(r"^tps = ([0-9.]+)", re.MULTILINE)

UPDATE_SCRIPT = """\\set aid random(1, 100000 * :scale)
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
"""
BULK_UPDATE = sql.SQL("UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid <= {}").format(
    sql.Literal(BULK_ROWS)
)

#: script name -> its title in the table
SCRIPTS = {"tpcb": "TPC-B-like", "update": "single-row UPDATE"}
#: settings name -> the captures run with them
TPS_CAPTURES = {
    "fast": (
        "none",
        "pgshovel",
        "pgshovel-row",
        "pgshovel-provenance",
        "pgshovel-plpgsql",
        "pgshovel-no-ddl",
        "jsontriga",
        "floor",
        "logical",
    ),
    "durable": ("none", "pgshovel", "jsontriga", "floor", "logical"),
}
BULK_CAPTURES = (
    "none",
    "pgshovel",
    "pgshovel-row",
    "pgshovel-provenance",
    "pgshovel-plpgsql",
    "jsontriga",
    "floor",
    "logical",
)


#: quick mode: the parts (scripts, "bulk") a capture runs in, where not all
QUICK_PARTS = {"pgshovel-provenance": ("tpcb", "bulk")}


def _runs_in(settings: Settings, mode: str, part: str) -> bool:
    return settings.mode != "quick" or part in QUICK_PARTS.get(mode, (part,))


@dataclass
class CaptureRuns:
    """Raw runs: TPS per settings, script and capture; bulk rows/s per capture; failures.

    ``failures`` maps a part (``fast``, ``durable``, ``bulk``) or the ``logical``
    capture to why it was not measured.
    """

    tps: dict[str, dict[str, dict[str, list[float]]]] = field(default_factory=dict)
    bulk: dict[str, list[float]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)


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
            modes = [mode for mode in available if _runs_in(self.settings, mode, name)]
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
        """Rows/s of one UPDATE of BULK_ROWS accounts per capture, alternating each round."""
        modes = [
            mode for mode in self.available(BULK_CAPTURES) if _runs_in(self.settings, mode, "bulk")
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
            logger.info("capture bulk round %d %s: %.3fs", number + 1, mode, seconds)
        self.runs.bulk = results


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


@dataclass(frozen=True)
class Comparison:
    """One figure per script: ``mode``'s TPS ÷ ``baseline``'s, optionally a gap to ``reference``."""

    key: str
    title: str
    mode: str
    baseline: str = "none"
    baseline_title: str = "no capture"
    goals: tuple[Goal, ...] = ()
    reference: str = ""
    reference_title: str = ""


COMPARISONS: tuple[Comparison, ...] = (
    Comparison("pgshovel", "capture overhead, {}, pgshovel", "pgshovel", goals=(GOAL,)),
    Comparison(
        "pgshovel_row",
        "capture overhead, {}, pgshovel with row triggers (before statement triggers)",
        "pgshovel-row",
    ),
    Comparison(
        "pgshovel_provenance",
        "capture overhead, {}, pgshovel with provenance",
        "pgshovel-provenance",
    ),
    Comparison(
        "provenance",
        "provenance on vs off, {}, pgshovel",
        "pgshovel-provenance",
        "pgshovel",
        "pgshovel without provenance",
        (PROVENANCE_GOAL,),
    ),
    Comparison(
        "pgshovel_plpgsql",
        "capture overhead, {}, pgshovel's PL/pgSQL fallback",
        "pgshovel-plpgsql",
    ),
    Comparison("jsontriga", "capture overhead, {}, pgq.jsontriga reference", "jsontriga"),
    Comparison("floor", "capture floor (constant event per row), {}", "floor"),
    Comparison("logical", "capture overhead, {}, logical decoding (wal2json) peer", "logical"),
    Comparison(
        "pgshovel_floor",
        "capture overhead, {}, pgshovel vs the capture floor",
        "pgshovel",
        "floor",
        "capture floor",
        (FLOOR_GOAL,),
        reference="none",
        reference_title="no capture",
    ),
    Comparison(
        "event_triggers",
        "schema event triggers on DML, {}, pgshovel",
        "pgshovel",
        "pgshovel-no-ddl",
        "pgshovel, event triggers disabled",
        (EVENT_TRIGGER_GOAL,),
    ),
)
#: the bulk UPDATE's figures: key -> (capture, title, goals, baseline, baseline title)
BULK_COMPARISONS: dict[str, tuple[str, str, tuple[Goal, ...], str, str]] = {
    "pgshovel": ("pgshovel", "pgshovel", (BULK_GOAL,), "none", "no capture"),
    "pgshovel_row": (
        "pgshovel-row",
        "pgshovel with row triggers (before statement triggers)",
        (),
        "none",
        "no capture",
    ),
    "pgshovel_provenance": (
        "pgshovel-provenance",
        "pgshovel with provenance",
        (),
        "none",
        "no capture",
    ),
    "provenance": (
        "pgshovel-provenance",
        "provenance on vs off, pgshovel",
        (PROVENANCE_GOAL,),
        "pgshovel",
        "pgshovel without provenance",
    ),
    "pgshovel_plpgsql": (
        "pgshovel-plpgsql",
        "pgshovel's PL/pgSQL fallback",
        (),
        "none",
        "no capture",
    ),
    "jsontriga": ("jsontriga", "pgq.jsontriga reference", (), "none", "no capture"),
    "floor": ("floor", "capture floor (constant event per row)", (), "none", "no capture"),
    "logical": ("logical", "logical decoding (wal2json) peer", (), "none", "no capture"),
}
#: settings name -> (key suffix, title suffix)
SETTINGS_NAMES = {"fast": ("", ""), "durable": (".durable", ", fsync+synchronous_commit on")}


def _note(
    runs: CaptureRuns,
    part: str,
    modes: Sequence[str],
    values: list[float],
    settings: Settings | None = None,
    script: str = "",
) -> str:
    """Why a figure without ``values`` was not measured: its captures' or its part's
    failure, or quick mode leaving a capture out of that script (``QUICK_PARTS``)."""
    if values:
        return ""
    if settings is not None:
        for mode in modes:
            if mode and not _runs_in(settings, mode, script):
                return f"not measured: quick mode runs {mode} for {', '.join(QUICK_PARTS[mode])}"
    for cause in (*modes, part):
        if cause in runs.failures:
            return f"not measured: {runs.failures[cause]}"[:300]
    return ""


def figures(runs: CaptureRuns, settings: Settings) -> list[Figure]:
    """Per settings and script, each comparison's figure; then the bulk UPDATE's figures."""
    made = []
    for name, (key_suffix, title_suffix) in SETTINGS_NAMES.items():
        seconds = settings.pgbench_seconds if name == "fast" else settings.durable_seconds
        details = {
            "clients": settings.pgbench_clients,
            "seconds": seconds,
            "scale": settings.pgbench_scale,
            "durable": name == "durable",
        }
        for script, script_title in SCRIPTS.items():
            tps = runs.tps.get(name, {}).get(script, {})
            for comparison in COMPARISONS:
                modes = (comparison.mode, comparison.baseline, comparison.reference)
                if not set(modes) - {""} <= set(TPS_CAPTURES[name]):
                    continue
                made.append(
                    Figure(
                        key=f"capture.{script}.{comparison.key}{key_suffix}",
                        title=f"{comparison.title.format(script_title)}{title_suffix} (TPS)",
                        unit="tps",
                        values=tps.get(comparison.mode, []),
                        baseline=tps.get(comparison.baseline, []),
                        baseline_title=comparison.baseline_title,
                        goals=comparison.goals,
                        note=_note(
                            runs, name, modes, tps.get(comparison.mode, []), settings, script
                        ),
                        details=details,
                        reference=tps.get(comparison.reference, []),
                        reference_title=comparison.reference_title,
                    )
                )
    for key, (mode, title, goals, baseline, baseline_title) in BULK_COMPARISONS.items():
        made.append(
            Figure(
                key=f"capture.bulk.{key}",
                title=f"bulk UPDATE of {BULK_ROWS:,} rows in one statement, {title} (rows/s)",
                unit="rows/s",
                values=runs.bulk.get(mode, []),
                baseline=runs.bulk.get(baseline, []),
                baseline_title=baseline_title,
                goals=goals,
                note=_note(runs, "bulk", (mode,), runs.bulk.get(mode, []), settings, "bulk"),
                details={"rows": BULK_ROWS, "scale": settings.pgbench_scale},
            )
        )
    return made
