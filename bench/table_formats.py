"""Table formats: micro-batch cost and memory against a table 100 times larger, and upkeep.

Through the worker's own targets (``_tf_work``; no services but PostgreSQL for
its target): the Delta, Iceberg and Parquet targets each load a table of
``tf_rows`` rows and, separately, one of 100 times as many, through their
snapshot sinks; then a fresh child process (``_tf_child``) applies the same
stream of micro-batches to each and reports the seconds of every micro-batch
and its peak RSS while applying. Figures: per-micro-batch time large ÷ small
(goal ≤ 1.5x for Delta and Iceberg; Parquet rewrites each touched table whole
by design and is reported), peak RSS large ÷ small (goal ≤ 1.3x for Delta and
Iceberg), and Delta's apply throughput on the small table ÷ the PostgreSQL
target's on the same stream (goal ≥ 0.5x; Iceberg's reported). The upkeep
figures run Delta and Iceberg with maintenance on for ``tf_upkeep_seconds``
(10 minutes in full mode) and count the table's data files after every
commit: the count at the end against the most seen, goal ≤ ``max_small_files``
+ 4 (compaction keeps it bounded).
"""

from __future__ import annotations

import json
import logging
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import _stack, _tf_work
from bench._modes import Settings
from bench._report import Figure, Goal
from bench._stats import schedule
from pgshovel.sandbox import SandboxConnection

logger = logging.getLogger(__name__)

TARGET_DATABASE = "pgshovel_bench_tf_target"
SCALE = 100
TIME_GOAL = 1.5
MEMORY_GOAL = 1.3
THROUGHPUT_GOAL = 0.5
#: data files allowed above max_small_files (the compacted files and one commit's worth)
FILES_SLACK = 4
BOUNDED = ("delta", "iceberg")


@dataclass
class TableFormatRuns:
    rows: int = 0
    changes: int = 0
    batches: int = 0
    #: kind -> size ("small"/"large") -> median seconds per micro-batch, one per round
    seconds: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    peak_mib: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    #: kind -> mutations/s on the small table, one per round (postgresql included)
    rates: dict[str, list[float]] = field(default_factory=dict)
    #: kind -> data files after each commit of the upkeep stream
    files: dict[str, list[int]] = field(default_factory=dict)
    upkeep: dict[str, Any] = field(default_factory=dict)
    #: why a kind was not measured
    notes: dict[str, str] = field(default_factory=dict)


def child(job: str, kind: str, where: str, rows: int, *options: str) -> dict[str, Any]:
    """Run one ``_tf_child`` job; its JSON result (a RuntimeError with its stderr if it failed)."""
    command = [sys.executable, "-m", "bench._tf_child", job, "--kind", kind, "--where", where]
    command += ["--rows", str(rows), *options]
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{kind} {job} on {rows:,} rows failed: {last}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _location(sandbox: SandboxConnection, kind: str, workdir: Path, rows: int) -> str:
    if kind == "postgresql":
        return _stack.create_database(sandbox, TARGET_DATABASE)
    root = workdir / "table_formats" / f"{kind}-{rows}"
    shutil.rmtree(root, ignore_errors=True)
    return str(root)


def _variants() -> list[str]:
    return [f"{kind}:{size}" for kind in _tf_work.KINDS for size in ("small", "large")] + [
        "postgresql:small"
    ]


def measure(sandbox: SandboxConnection, settings: Settings, workdir: Path) -> TableFormatRuns:
    runs = TableFormatRuns(
        rows=settings.tf_rows, changes=settings.tf_changes, batches=settings.tf_batches
    )
    for number, variant in schedule(settings.tf_rounds, _variants()):
        kind, size = variant.split(":")
        if kind in runs.notes:
            continue
        rows = settings.tf_rows * (SCALE if size == "large" else 1)
        where = _location(sandbox, kind, workdir, rows)
        try:
            _tf_work.load(kind, where, rows)
            result = child(
                "apply",
                kind,
                where,
                rows,
                *("--changes", str(settings.tf_changes), "--batches", str(settings.tf_batches)),
            )
        except Exception as error:  # reported on this kind's figures; the others go on
            logger.exception("table_formats: %s on %d rows failed", kind, rows)
            runs.notes[kind] = f"not measured: {type(error).__name__}: {error}"[:300]
            continue
        finally:
            if kind != "postgresql":
                shutil.rmtree(where, ignore_errors=True)
        median = statistics.median(result["seconds"])
        runs.seconds.setdefault(kind, {}).setdefault(size, []).append(median)
        runs.peak_mib.setdefault(kind, {}).setdefault(size, []).append(result["peak_mib"])
        if size == "small":
            # Every micro-batch holds as many mutations: the median one's rate, as for time.
            rate = result["mutations"] / len(result["seconds"]) / median
            runs.rates.setdefault(kind, []).append(rate)
        logger.info(
            "table_formats round %d %s, %d rows: %.3f s/micro-batch, peak %.0f MiB",
            number + 1,
            kind,
            rows,
            median,
            result["peak_mib"],
        )
    for kind in BOUNDED:
        where = _location(sandbox, kind, workdir, settings.tf_rows)
        try:
            _tf_work.load(kind, where, settings.tf_rows)
            result = child(
                "upkeep",
                kind,
                where,
                settings.tf_rows,
                *("--changes", str(settings.tf_changes)),
                *("--seconds", str(settings.tf_upkeep_seconds)),
                *("--max-small-files", str(settings.tf_max_small_files)),
            )
        except Exception as error:
            logger.exception("table_formats: the %s upkeep stream failed", kind)
            runs.notes[f"{kind}.files"] = f"not measured: {type(error).__name__}: {error}"[:300]
            continue
        finally:
            shutil.rmtree(where, ignore_errors=True)
        runs.files[kind] = result["files"]
        runs.upkeep[kind] = result
        logger.info(
            "table_formats upkeep %s: %d micro-batches, files at the end %s, max %s",
            kind,
            result["micro_batches"],
            result["files"][-1:],
            max(result["files"], default=None),
        )
    return runs


def _scaling(runs: TableFormatRuns, kind: str, settings: Settings) -> list[Figure]:
    large = runs.rows * SCALE
    note = runs.notes.get(kind, "")
    details: dict[str, Any] = {
        "rows": large,
        "baseline rows": runs.rows,
        "mutations per micro-batch": runs.changes,
        "micro-batches": runs.batches,
    }
    if kind == "parquet":
        details["why"] = "rewrites each touched table whole per micro-batch (by design)"
    sizes = runs.seconds.get(kind, {})
    peaks = runs.peak_mib.get(kind, {})
    goals = kind in BOUNDED
    return [
        Figure(
            key=f"table_formats.{kind}.time",
            title=f"{kind}: seconds per micro-batch, table of {large:,} rows",
            unit="s",
            values=sizes.get("large", []),
            baseline=sizes.get("small", []),
            baseline_title=f"{runs.rows:,} rows, same stream",
            goals=(Goal("ratio", "<=", TIME_GOAL),) if goals else (),
            note=note,
            details=details,
        ),
        Figure(
            key=f"table_formats.{kind}.rss",
            title=f"{kind}: worker peak RSS applying, table of {large:,} rows",
            unit="MiB",
            values=peaks.get("large", []),
            baseline=peaks.get("small", []),
            baseline_title=f"{runs.rows:,} rows, same stream",
            goals=(Goal("ratio", "<=", MEMORY_GOAL),) if goals else (),
            note=note,
            details=details,
        ),
    ]


def _sampled(series: list[Any], most: int = 60) -> list[Any]:
    """At most ``most`` evenly spaced items of ``series``, its last one included."""
    if len(series) <= most:
        return list(series)
    step = len(series) / most
    return [series[int(index * step)] for index in range(most - 1)] + [series[-1]]


def figures(runs: TableFormatRuns, settings: Settings) -> list[Figure]:
    made: list[Figure] = []
    for kind in _tf_work.KINDS:
        made.extend(_scaling(runs, kind, settings))
    postgres_note = runs.notes.get("postgresql", "")
    for kind in BOUNDED:
        made.append(
            Figure(
                key=f"table_formats.{kind}.throughput",
                title=f"{kind}: apply throughput, table of {runs.rows:,} rows (mutations/s)",
                unit="/s",
                values=runs.rates.get(kind, []),
                baseline=runs.rates.get("postgresql", []),
                baseline_title="PostgreSQL target, same stream",
                goals=(Goal("ratio", ">=", THROUGHPUT_GOAL),) if kind == "delta" else (),
                note=runs.notes.get(kind, "") or postgres_note,
                details={"mutations per micro-batch": runs.changes},
            )
        )
    bound = settings.tf_max_small_files + FILES_SLACK
    for kind in BOUNDED:
        counts = runs.files.get(kind, [])
        upkeep = runs.upkeep.get(kind, {})
        made.append(
            Figure(
                key=f"table_formats.{kind}.files",
                title=(
                    f"{kind}: data files at the end of a {settings.tf_upkeep_seconds:.0f}s "
                    f"stream, maintenance on (max_small_files {settings.tf_max_small_files})"
                ),
                unit="files",
                values=[float(counts[-1])] if counts else [],
                baseline=[float(max(counts))] if counts else [],
                baseline_title="most during the stream",
                goals=(Goal("value", "<=", float(bound)),),
                note=runs.notes.get(f"{kind}.files", "")
                or ("" if counts else "not measured: no micro-batch in the upkeep stream"),
                details={
                    "micro-batches": upkeep.get("micro_batches", 0),
                    "files after each commit (sampled)": _sampled(counts),
                    "seconds at each sample": _sampled(upkeep.get("at", [])),
                },
            )
        )
    return made
