"""Set-topic latency while the relay snapshots a big table into its table topic, ÷ without.

One set holds the latency probe table and a table of ``table_snapshot_rows``
orders; its relay publishes table topics (``snapshot: true``, chunks of
``CHUNK_ROWS``) under a prefix new to each run, so the orders table is
snapshotted from the relay's start. A latency round (``bench.latency``'s
paced writer and consumer, on the set topic) runs at once, while the
snapshot goes on; once the snapshot is recorded done, a second round on the
same relay gives the baseline. The figure is the p50 during the snapshot, its
baseline the p50 after it: the ratio says how much a chunked snapshot slows
the stream (a snapshot in one piece stopped it for its whole length).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from psycopg2 import sql

from bench import _schema, _stack
from bench._modes import Settings
from bench._report import Figure
from bench._stats import percentile
from bench.latency import one_round
from pgshovel.sandbox import SandboxConnection

logger = logging.getLogger(__name__)

SET = "tsnap"
DATABASE = "pgshovel_bench_tsnap"
TABLE = "tsnap_orders"
CHUNK_ROWS = 10_000
_DONE = re.compile(r"holds public\.tsnap_orders: (\d+) row\(s\) in (\d+) chunk\(s\), ([\d.]+)s")


@dataclass
class TableSnapshotRuns:
    during_p50: list[float] = field(default_factory=list)
    after_p50: list[float] = field(default_factory=list)
    during_p95: list[float] = field(default_factory=list)
    snapshot_seconds: list[float] = field(default_factory=list)
    round_seconds: float = 0.0


def measure(sandbox: SandboxConnection, settings: Settings, workdir: Path) -> TableSnapshotRuns:
    dsn = _stack.create_database(sandbox, DATABASE)
    _stack.execute(
        dsn,
        [
            _schema.LATENCY_DDL,
            sql.SQL(
                "CREATE TABLE {} (id bigint PRIMARY KEY, customer integer NOT NULL, note text)"
            ).format(sql.Identifier("public", TABLE)),
            sql.SQL(
                "INSERT INTO {} SELECT n, n % 1000, md5(n::text) FROM generate_series(1, {}) n"
            ).format(sql.Identifier("public", TABLE), sql.Literal(settings.table_snapshot_rows)),
        ],
    )
    _stack.create_set(sandbox, SET, dsn, [_schema.LATENCY, TABLE])
    config = _stack.write_relay_yml(workdir / "relay-tsnap.yml", sandbox)
    document = config.read_text()
    prefix = f"bench-tsnap-{uuid.uuid4().hex[:8]}"
    config.write_text(
        document.replace(
            "  configuration:\n",
            "  configuration:\n"
            f"    table_topics: {{prefix: {prefix}, snapshot_chunk_rows: {CHUNK_ROWS}}}\n",
            1,
        )
    )
    runs = TableSnapshotRuns()
    rounds = dataclasses.replace(settings, latency_seconds=min(settings.latency_seconds, 5.0))
    runs.round_seconds = rounds.latency_warmup + rounds.latency_seconds
    log = workdir / "relay-tsnap.log"
    earlier = log.stat().st_size if log.exists() else 0  # an earlier run's lines stay
    relay = _stack.RelayProcess(sandbox, config, SET, log)

    def finished() -> re.Match[str] | None:
        return _DONE.search(relay.log_text()[earlier:])

    try:
        during, _rate = one_round(dsn, sandbox.kafka_config(), rounds, SET)
        _stack.wait_for(
            lambda: finished() is not None,
            600,
            "the table-topic snapshot to finish",
            relay,
        )
        after, _rate = one_round(dsn, sandbox.kafka_config(), rounds, SET)
    finally:
        relay.stop()
    found = finished()
    seconds = float(found.group(3)) if found is not None else 0.0
    runs.during_p50.append(percentile(during, 0.5) or 0.0)
    runs.during_p95.append(percentile(during, 0.95) or 0.0)
    runs.after_p50.append(percentile(after, 0.5) or 0.0)
    runs.snapshot_seconds.append(seconds)
    logger.info(
        "table snapshot of %d rows in %.1fs: set-topic p50 %.1f ms during, %.1f ms after",
        settings.table_snapshot_rows,
        seconds,
        runs.during_p50[-1],
        runs.after_p50[-1],
    )
    return runs


def figures(runs: TableSnapshotRuns, settings: Settings) -> list[Figure]:
    covered = all(seconds >= runs.round_seconds for seconds in runs.snapshot_seconds)
    return [
        Figure(
            key="latency.p50_during_table_snapshot",
            title=(
                f"latency commit → Kafka, p50 while {settings.table_snapshot_rows} rows are "
                f"snapshotted into a table topic (chunks of {CHUNK_ROWS})"
            ),
            unit="ms",
            values=runs.during_p50,
            baseline=runs.after_p50,
            baseline_title="the same relay once the snapshot is done",
            note=""
            if covered
            else "the snapshot ended before the round: the figure mixes in time after it",
            details={
                "rows": settings.table_snapshot_rows,
                "chunk_rows": CHUNK_ROWS,
                "snapshot_seconds": runs.snapshot_seconds,
                "p95_during_ms": [round(value, 1) for value in runs.during_p95],
                "round_seconds": runs.round_seconds,
                "offered_rate": settings.latency_rate,
            },
        )
    ]
