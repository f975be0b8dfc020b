"""What the demo prints, computed without touching a service: progress lines and the final table.

The demo samples the pipeline every couple of seconds into a :class:`Sample`
(workload counters, the worker's phase and offset, the topic's end, the relay's
queue, the worker's status document, the copy's row counts) and prints
:func:`progress_line`, then, once the copy streams, :func:`apply_line` (what
the worker applies per second, its lag, the rows of each table);
:func:`snapshot_status` pulls the worker's latest snapshot message out of its
log. At the end it compares every
table and prints :func:`render_comparison`: source and target row counts and
checksums side by side, MATCH or DIFF per table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pgshovel._numbers import rows_of_estimate

# The worker's log lines (pgshovel.replication.loaders, .progress and .worker).
_LOADED = re.compile(r"snapshot loaded: (\d+) rows")
# "123/~456 rows", or "789 rows (~456 estimated)" once the count passed the estimate
_PROGRESS = re.compile(r": (\d+)(?:/~| rows \(~)(\d+)")
_PLANNED = re.compile(r"loading \d+ table\(s\) in \d+ range\(s\): ")
_ESTIMATE = re.compile(r" ~(\d+) rows")
CHECKSUM_WIDTH = 12


@dataclass(frozen=True)
class CopyFigures:
    """What the worker says of itself in its status node."""

    #: mutations applied per second over its latest sample (about ten seconds)
    rate: float | None
    lag_seconds: float | None
    mutations: int | None


def copy_figures(document: Mapping[str, Any] | None) -> CopyFigures | None:
    """The figures of a worker's status document, as written (None without a document)."""
    if document is None:
        return None
    history = document.get("history")
    samples = history.get("samples") if isinstance(history, Mapping) else None
    rate = float(samples[-1][2]) if samples else None
    lag = document.get("lag_seconds")
    mutations = document.get("mutations")
    return CopyFigures(
        rate=rate,
        lag_seconds=float(lag) if isinstance(lag, (int, float)) else None,
        mutations=int(mutations) if isinstance(mutations, int) else None,
    )


@dataclass(frozen=True)
class Sample:
    """One look at the pipeline."""

    elapsed: float
    committed: int
    aborted: int
    # The worker's phase from its state table: None before it wrote any.
    phase: str | None
    # The offset the worker reads next (None before its snapshot finished).
    next_offset: int | None
    # The topic's end offset; None while the topic does not exist yet.
    topic_end: int | None
    # The topic's end when the demo started: messages of earlier runs.
    topic_start: int
    snapshot: str | None = None
    #: the worker's status document (None before it writes one)
    copy: CopyFigures | None = None
    #: (table, rows) of the copy; rows None while the table does not exist
    table_rows: tuple[tuple[str, int | None], ...] = ()

    @property
    def relayed(self) -> int:
        """Messages the relay published in this run (Begin, mutations, Commit/Rollback)."""
        return max(0, (self.topic_end or 0) - self.topic_start)

    @property
    def lag(self) -> int | None:
        """Messages on the topic the worker has not applied yet."""
        if self.next_offset is None or self.topic_end is None:
            return None
        return max(0, self.topic_end - self.next_offset)


def progress_line(sample: Sample) -> str:
    """``[ 12s] workload 340 tx (31 rolled back) | relayed 2210 msgs | worker streaming, lag 4``."""
    if sample.phase is None:
        # Before the worker records its state: Spark starts (up to a minute), then the load.
        worker = (
            f"worker loading the snapshot ({sample.snapshot})"
            if sample.snapshot
            else "worker starting Spark"
        )
    elif sample.phase == "snapshot":
        worker = f"worker loading the snapshot ({sample.snapshot or 'started'})"
    else:
        lag = sample.lag
        worker = f"worker streaming, lag {'?' if lag is None else lag} msgs"
    return (
        f"[{sample.elapsed:4.0f}s] workload {sample.committed} tx ({sample.aborted} rolled back)"
        f" | relayed {sample.relayed} msgs | {worker}"
    )


def apply_line(sample: Sample) -> str:
    """``       copy applies 95 mutations/s, lag 0.4 s | rows: orders 1234, ...``."""
    copy = sample.copy
    if copy is None:
        applied = "copy: no status yet"
    else:
        rate = "?" if copy.rate is None else f"{copy.rate:.0f}"
        lag = "?" if copy.lag_seconds is None else f"{copy.lag_seconds:.1f} s"
        total = "" if copy.mutations is None else f" ({copy.mutations} in all)"
        applied = f"copy applies {rate} mutations/s{total}, lag {lag}"
    rows = ", ".join(
        f"{table} {'-' if count is None else count}" for table, count in sample.table_rows
    )
    return f"{'':7}{applied} | rows: {rows}" if rows else f"{'':7}{applied}"


def snapshot_status(log_text: str) -> str | None:
    """The worker's latest snapshot news from its log, summed over tables: ``123/~4567 rows``."""
    for line in reversed(log_text.splitlines()):
        if "snapshot loaded: " in line:
            loaded = _LOADED.search(line)
            return f"loaded {loaded.group(1)} rows" if loaded else "loaded"
        if "snapshot progress: " in line:
            pairs = [(int(done), int(total)) for done, total in _PROGRESS.findall(line)]
            done, total = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
            return f"{rows_of_estimate(done, total)} copied"
        if _PLANNED.search(line):
            total = sum(int(rows) for rows in _ESTIMATE.findall(line))
            return f"0/~{total} rows copied"
        if "exported snapshot " in line:
            return "snapshot exported"
    return None


def caught_up(next_offset: int | None, topic_end: int | None, queue_pending: int) -> bool:
    """The worker applied everything on the topic and the relay's queue holds nothing more."""
    if next_offset is None or queue_pending:
        return False
    return next_offset >= (topic_end or 0)


@dataclass(frozen=True)
class TableComparison:
    """Row counts and checksums of one table in the source and in the target."""

    table: str
    source_rows: int
    target_rows: int | None
    source_checksum: str
    target_checksum: str | None

    @property
    def matches(self) -> bool:
        return self.target_rows == self.source_rows and self.target_checksum == self.source_checksum


def render_comparison(comparisons: Sequence[TableComparison]) -> str:
    """A side-by-side table, one row per table; a missing target table shows as ``missing``."""
    header = ("table", "source rows", "target rows", "source md5", "target md5", "")
    rows = [header] + [
        (
            item.table,
            str(item.source_rows),
            "missing" if item.target_rows is None else str(item.target_rows),
            item.source_checksum[:CHECKSUM_WIDTH],
            "missing" if item.target_checksum is None else item.target_checksum[:CHECKSUM_WIDTH],
            "MATCH" if item.matches else "DIFF",
        )
        for item in comparisons
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    numeric = {1, 2}
    lines = []
    for number, row in enumerate(rows):
        cells = [
            cell.rjust(widths[i]) if i in numeric and number else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
        if number == 0:
            lines.append("  ".join("-" * width for width in widths[:-1]) + "  -----")
    return "\n".join(lines)
