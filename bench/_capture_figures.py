"""The capture group's plan and figures: which captures run in which part, and what is compared.

Pure (no I/O): :mod:`bench.capture` measures the runs into a :class:`CaptureRuns`,
:func:`figures` turns them into one figure per comparison, settings and script (TPS
of pgbench), then the bulk UPDATE's (rows/s), with the sandbox's fast settings and
again with ``fsync`` and ``synchronous_commit`` on. Every figure of pgshovel is also
given against the floor (one constant event per row) and the logical decoding peer,
each as the gap between the two ratios to no capture in the same run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bench._modes import Settings
from bench._report import Figure, Goal

GOAL = Goal("ratio", ">=", 0.85)
#: event triggers fire on DDL only: a DDL-free workload must not notice them
EVENT_TRIGGER_GOAL = Goal("ratio", ">=", 0.95)
#: provenance on costs at most 5% of capture without it
PROVENANCE_GOAL = Goal("ratio", ">=", 0.95)
#: pgshovel's ratio to no capture within 0.05 of the floor's
FLOOR_GOAL = Goal("gap", ">=", -0.05)
#: pgshovel's ratio to no capture at least the logical decoding peer's (issue 29)
LOGICAL_GOAL = Goal("gap", ">=", 0.0)
BULK_GOAL = Goal("ratio", ">=", 0.5)
BULK_ROWS = 100_000

#: script name -> its title in the table
SCRIPTS = {"tpcb": "TPC-B-like", "update": "single-row UPDATE"}
#: settings name -> the captures run with them
TPS_CAPTURES = {
    "fast": (
        "none",
        "pgshovel",
        "pgshovel-unpacked",
        "pgshovel-row",
        "pgshovel-provenance",
        "pgshovel-plpgsql",
        "pgshovel-no-ddl",
        "jsontriga",
        "floor",
        "trigger-bound",
        "logical",
    ),
    "durable": (
        "none",
        "pgshovel",
        "pgshovel-unpacked",
        "jsontriga",
        "floor",
        "trigger-bound",
        "logical",
    ),
}
#: settings name -> the captures of the bulk UPDATE run with them
BULK_CAPTURES = {
    "fast": (
        "none",
        "pgshovel",
        "pgshovel-unpacked",
        "pgshovel-row",
        "pgshovel-provenance",
        "pgshovel-plpgsql",
        "jsontriga",
        "floor",
        "trigger-bound",
        "logical",
    ),
    "durable": ("none", "pgshovel", "pgshovel-unpacked", "floor", "trigger-bound", "logical"),
}
#: the part of each settings' bulk UPDATE (quick mode's QUICK_PARTS name it)
BULK_PARTS = {"fast": "bulk", "durable": "bulk-durable"}

#: quick mode: the parts a capture runs in, where not all: "tpcb" and "update" (pgbench with
#: the fast settings), "tpcb-durable" and "update-durable" (with durable commits), "bulk" and
#: "bulk-durable". Quick only keeps the bench working: every capture still runs in one part
#: at least, and every part runs no capture and pgshovel (75 runs of about a second, not 156).
QUICK_PARTS = {
    "pgshovel-provenance": ("tpcb", "bulk"),
    "pgshovel-unpacked": ("bulk",),
    "pgshovel-row": ("tpcb",),
    "pgshovel-plpgsql": ("tpcb",),
    "pgshovel-no-ddl": ("tpcb",),
    "jsontriga": ("tpcb",),
    "floor": ("tpcb", "update"),
    "trigger-bound": ("tpcb",),
    "logical": ("tpcb", "update", "bulk"),
}


def tps_part(settings_name: str, script: str) -> str:
    """The part (``QUICK_PARTS``) of ``script``'s pgbench runs with settings ``settings_name``."""
    return script if settings_name == "fast" else f"{script}-durable"


def runs_in(settings: Settings, mode: str, part: str) -> bool:
    return settings.mode != "quick" or part in QUICK_PARTS.get(mode, (part,))


@dataclass
class CaptureRuns:
    """Raw runs: TPS per settings, script and capture; bulk rows/s per settings and capture;
    failures.

    ``failures`` maps a part (``fast``, ``durable``, ``bulk``, ``bulk-durable``) or the
    ``logical`` capture to why it was not measured.
    """

    tps: dict[str, dict[str, dict[str, list[float]]]] = field(default_factory=dict)
    bulk: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)


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


def _peers(title: str) -> tuple[Comparison, ...]:
    """pgshovel against the floor and against the logical decoding peer (gaps to no capture)."""
    return (
        Comparison(
            "pgshovel_floor",
            f"{title}, pgshovel vs the capture floor",
            "pgshovel",
            "floor",
            "capture floor",
            (FLOOR_GOAL,),
            reference="none",
            reference_title="no capture",
        ),
        Comparison(
            "pgshovel_logical",
            f"{title}, pgshovel vs the logical decoding (wal2json) peer",
            "pgshovel",
            "logical",
            "logical decoding (wal2json) peer",
            (LOGICAL_GOAL,),
            reference="none",
            reference_title="no capture",
        ),
    )


def _bound(title: str) -> tuple[Comparison, ...]:
    """pgshovel's triggers calling a function that does nothing: the least capture through
    them can cost; then that bound against the logical decoding peer (gaps to no capture).
    Where the bound's gap is below 0, no capture through triggers reaches the peer there."""
    return (
        Comparison(
            "trigger_bound",
            f"{title}, pgshovel's triggers capturing nothing (trigger bound)",
            "trigger-bound",
        ),
        Comparison(
            "trigger_bound_logical",
            f"{title}, trigger bound vs the logical decoding (wal2json) peer",
            "trigger-bound",
            "logical",
            "logical decoding (wal2json) peer",
            reference="none",
            reference_title="no capture",
        ),
    )


def _packing(title: str, versus: str) -> tuple[Comparison, ...]:
    return (
        Comparison(
            "pgshovel_unpacked",
            f"{title}, pgshovel with packing off (a queue row per change)",
            "pgshovel-unpacked",
        ),
        Comparison("packing", versus, "pgshovel", "pgshovel-unpacked", "pgshovel with packing off"),
    )


COMPARISONS: tuple[Comparison, ...] = (
    Comparison("pgshovel", "capture overhead, {}, pgshovel", "pgshovel", goals=(GOAL,)),
    *_packing("capture overhead, {}", "packing on vs off, {}, pgshovel"),
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
    *_peers("capture overhead, {}"),
    *_bound("capture overhead, {}"),
    Comparison(
        "event_triggers",
        "schema event triggers on DML, {}, pgshovel",
        "pgshovel",
        "pgshovel-no-ddl",
        "pgshovel, event triggers disabled",
        (EVENT_TRIGGER_GOAL,),
    ),
)
_BULK_TITLE = f"bulk UPDATE of {BULK_ROWS:,} rows in one statement"
BULK_COMPARISONS: tuple[Comparison, ...] = (
    Comparison("pgshovel", f"{_BULK_TITLE}, pgshovel", "pgshovel", goals=(BULK_GOAL,)),
    *_packing(_BULK_TITLE, f"{_BULK_TITLE}, packing on vs off, pgshovel"),
    Comparison(
        "pgshovel_row",
        f"{_BULK_TITLE}, pgshovel with row triggers (before statement triggers)",
        "pgshovel-row",
    ),
    Comparison(
        "pgshovel_provenance", f"{_BULK_TITLE}, pgshovel with provenance", "pgshovel-provenance"
    ),
    Comparison(
        "provenance",
        f"{_BULK_TITLE}, provenance on vs off, pgshovel",
        "pgshovel-provenance",
        "pgshovel",
        "pgshovel without provenance",
        (PROVENANCE_GOAL,),
    ),
    Comparison(
        "pgshovel_plpgsql", f"{_BULK_TITLE}, pgshovel's PL/pgSQL fallback", "pgshovel-plpgsql"
    ),
    Comparison("jsontriga", f"{_BULK_TITLE}, pgq.jsontriga reference", "jsontriga"),
    Comparison("floor", f"{_BULK_TITLE}, capture floor (constant event per row)", "floor"),
    Comparison("logical", f"{_BULK_TITLE}, logical decoding (wal2json) peer", "logical"),
    *_peers(_BULK_TITLE),
    *_bound(_BULK_TITLE),
)
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
            if mode and not runs_in(settings, mode, script):
                return f"not measured: quick mode runs {mode} for {', '.join(QUICK_PARTS[mode])}"
    for cause in (*modes, part):
        if cause in runs.failures:
            return f"not measured: {runs.failures[cause]}"[:300]
    return ""


def _compared(
    comparison: Comparison, measured: dict[str, list[float]], available: Sequence[str]
) -> bool:
    modes = (comparison.mode, comparison.baseline, comparison.reference)
    return set(modes) - {""} <= set(available)


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
                if not _compared(comparison, tps, TPS_CAPTURES[name]):
                    continue
                modes = (comparison.mode, comparison.baseline, comparison.reference)
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
                            runs,
                            name,
                            modes,
                            tps.get(comparison.mode, []),
                            settings,
                            tps_part(name, script),
                        ),
                        details=details,
                        reference=tps.get(comparison.reference, []),
                        reference_title=comparison.reference_title,
                    )
                )
    for name, (key_suffix, title_suffix) in SETTINGS_NAMES.items():
        part = BULK_PARTS[name]
        bulk = runs.bulk.get(name, {})
        for comparison in BULK_COMPARISONS:
            if not _compared(comparison, bulk, BULK_CAPTURES[name]):
                continue
            modes = (comparison.mode, comparison.baseline, comparison.reference)
            made.append(
                Figure(
                    key=f"capture.bulk.{comparison.key}{key_suffix}",
                    title=f"{comparison.title}{title_suffix} (rows/s)",
                    unit="rows/s",
                    values=bulk.get(comparison.mode, []),
                    baseline=bulk.get(comparison.baseline, []),
                    baseline_title=comparison.baseline_title,
                    goals=comparison.goals,
                    note=_note(runs, part, modes, bulk.get(comparison.mode, []), settings, part),
                    details={"rows": BULK_ROWS, "scale": settings.pgbench_scale},
                    reference=bulk.get(comparison.reference, []),
                    reference_title=comparison.reference_title,
                )
            )
    return made
